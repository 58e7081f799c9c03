/*
 * produce.c: what the rest of the driver needs of a producer's in-flight
 * table and topic cache (drain.c resolves deliveries, client.c releases).
 */
#ifndef SLUICE_PRODUCE_H
#define SLUICE_PRODUCE_H

#include "client.h"

/* The DeliveryHandle in slot, and the slot freed. */
VALUE sluice_inflight_release(client_t *c, long slot);
/* The topic handles and topic configurations, destroyed (no GVL needed). */
void sluice_topics_release(client_t *c);
void sluice_topic_confs_release(client_t *c);

#endif
