/*
 * produce.c: what the rest of the driver needs of a producer's in-flight
 * topic cache (client.c releases it).
 */
#ifndef SLUICE_PRODUCE_H
#define SLUICE_PRODUCE_H

#include "client.h"

/* The topic handles and topic configurations, destroyed (no GVL needed). */
void sluice_topics_release(client_t *c);
void sluice_topic_confs_release(client_t *c);

#endif
