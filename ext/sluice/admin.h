/*
 * admin.c (Sluice::Native::Admin): what the rest of the driver needs of it.
 */
#ifndef SLUICE_ADMIN_H
#define SLUICE_ADMIN_H

#include "sluice.h"

/* An admin request's result event -> [request_id, code, message, payload]; Qundef for other events (drain.c). */
VALUE sluice_admin_result(rd_kafka_event_t *ev);

#endif
