/*
 * relay.c: a consumer's main-queue events, handed over by librdkafka's
 * background thread so that serving them is no "poll" of the consumer.
 * consumer.c owns it: attaches and starts it, hands its items to drain.c (the
 * consumer's event source), closes and frees it in its steps of the release.
 */
#ifndef SLUICE_RELAY_H
#define SLUICE_RELAY_H

#include "client.h"

typedef struct relay relay_t;
/* An event, or a log line (client.h; freed with sluice_event_item_free). */
typedef event_item_t relay_item_t;

relay_t *sluice_relay_attach(rd_kafka_conf_t *conf);
void sluice_relay_start(relay_t *r, rd_kafka_t *rk, rd_kafka_queue_t *main_queue);
/* Takes the oldest item into *out (the caller frees it with sluice_event_item_free); false when empty. */
int sluice_relay_pop(relay_t *r, relay_item_t *out);
size_t sluice_relay_length(relay_t *r);
void sluice_relay_set_pipe(relay_t *r, int wake_w);
/* Copies the lines of the log records queued so far from facility fac that
 * contain needle into buf ("; "-separated, truncated to size); how many matched. */
size_t sluice_relay_find_logs(relay_t *r, const char *fac, const char *needle, char *buf, size_t size);
void sluice_relay_close(relay_t *r);
void sluice_relay_free(relay_t *r);


#endif
