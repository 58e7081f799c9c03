/*
 * consumer.c and consume.c (Sluice::Native::Consumer): what the rest of the
 * driver needs of a consumer — the check every consumer call makes (consume.c,
 * transactions.c, test_hooks.c). Its release and its close check reach the
 * base through its kind's table (consumer.c), not by name.
 */
#ifndef SLUICE_CONSUMER_H
#define SLUICE_CONSUMER_H

#include "client.h"

/* The struct of a usable consumer; raises for a closed or closing one, or one inherited through fork.
 * Inline, through client.c: the files that check a consumer call no code of consumer.c's. */
static inline client_t *sluice_consumer_open(VALUE self) {
    client_t *c = sluice_client_open(self);
    if (!c->consumer.queue) rb_raise(rb_eTypeError, "not a consumer");
    sluice_client_refuse(c); /* ConsumerClosedError once another thread began closing it */
    return c;
}

/* consume.c: the last #consume's events destroyed and its buffers freed; _free: the buffers only (a forked child) */
void sluice_consume_release(client_t *c);
void sluice_consume_free(client_t *c);

#endif
