/*
 * produce.c (Sluice::Native::Producer): the producer's struct, which begins
 * with the base's (client.h). Its fields are produce.c's alone.
 */
#ifndef SLUICE_PRODUCE_H
#define SLUICE_PRODUCE_H

#include "client.h"

typedef struct {
    char *name;
    size_t len;
    int conf_id; /* 0: the producer's own topic settings; n: topic_confs[n - 1] */
    rd_kafka_topic_t *rkt;
} topic_entry_t;

typedef int32_t (*partitioner_fn)(const rd_kafka_topic_t *, const void *, size_t, int32_t, void *, void *);

typedef struct {
    client_t base;             /* first: a producer's client_t * points to its producer_t */
    partitioner_fn partitioner;
    VALUE inflight;            /* Array: slot -> DeliveryHandle (nil when free) */
    int32_t *free_slots;       /* stack of free slots; capacity >= inflight length */
    long free_count, free_capa;
    long inflight_count;
    VALUE handle_class;        /* what #produce returns (Sluice::DeliveryHandle) */
    VALUE notifier;            /* given to every handle: wakes its waiters */
    topic_entry_t *topics;     /* topic handles, so produce skips librdkafka's by-name lookup (grows: malloc'd) */
    int topic_count, topic_capa;
    rd_kafka_topic_conf_t **topic_confs; /* variants' topic settings (#add_topic_config), opaque = their id */
    int topic_conf_count, topic_conf_capa;
    long lines_delivered;      /* #produce_lines' messages delivered (counted here: no handle each) */
    int64_t *missed;           /* #produce_lines' reports that were no delivery: line, code, line, code... */
    long missed_count, missed_capa; /* in int64_t pairs; malloc'd, emptied by #line_reports */
} producer_t;

/* Only for a client of the producer kind (a method of Native::Producer's). */
static inline producer_t *sluice_producer_of(client_t *c) { return (producer_t *)c; }

#endif
