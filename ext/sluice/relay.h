/*
 * relay.c: a consumer's main-queue events, handed over by librdkafka's
 * background thread so that serving them is no "poll" of the consumer.
 * consumer.c attaches and starts a relay, drain.c takes its items, client.c
 * closes and frees it with the handle.
 */
#ifndef SLUICE_RELAY_H
#define SLUICE_RELAY_H

#include "sluice.h"

typedef struct relay relay_t;
/* An event, or a log line (event NULL; fac and line malloc'd). */
typedef struct {
    rd_kafka_event_t *event;
    int level;
    char *fac, *line;
} relay_item_t;

relay_t *sluice_relay_attach(rd_kafka_conf_t *conf);
void sluice_relay_start(relay_t *r, rd_kafka_t *rk, rd_kafka_queue_t *main_queue);
/* Takes the oldest item into *out (the caller frees it with sluice_relay_item_free); false when empty. */
int sluice_relay_pop(relay_t *r, relay_item_t *out);
void sluice_relay_item_free(relay_item_t *item);
size_t sluice_relay_length(relay_t *r);
void sluice_relay_set_pipe(relay_t *r, int wake_w);
/* Copies the lines of the log records queued so far from facility fac that
 * contain needle into buf ("; "-separated, truncated to size); how many matched. */
size_t sluice_relay_find_logs(relay_t *r, const char *fac, const char *needle, char *buf, size_t size);
void sluice_relay_close(relay_t *r);
void sluice_relay_free(relay_t *r);


#endif
