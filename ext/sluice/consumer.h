/*
 * consumer.c and consume.c (Sluice::Native::Consumer): what the rest of the
 * driver needs of a consumer — the checks every consumer call makes (gate.c,
 * transactions.c, test_hooks.c) and its release (client.c).
 */
#ifndef SLUICE_CONSUMER_H
#define SLUICE_CONSUMER_H

#include "client.h"

/* The struct of a usable consumer; raises for a closed or closing one, or one inherited through fork. */
client_t *sluice_consumer_open(VALUE self);
/* Raises ConsumerClosedError once another thread began closing the consumer. */
void sluice_consumer_not_closing(client_t *c);
/* Releases what a consumer holds besides the handle (release_native, no GVL). */
void sluice_consumer_release(client_t *c);
/* consume.c: the last #consume's events destroyed and its buffers freed; _free: the buffers only (a forked child) */
void sluice_consume_release(client_t *c);
void sluice_consume_free(client_t *c);

#endif
