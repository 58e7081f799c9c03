/*
 * admin.c (Sluice::Native::Admin): what the rest of the driver needs of it.
 */
#ifndef SLUICE_ADMIN_H
#define SLUICE_ADMIN_H

#include "sluice.h"

/* The class, so client.c can call an admin an admin in its errors. */
extern VALUE sluice_cAdmin;

/* An admin request's result event -> [request_id, code, message, payload]; Qundef for other events (drain.c). */
VALUE sluice_admin_result(rd_kafka_event_t *ev);

#endif
