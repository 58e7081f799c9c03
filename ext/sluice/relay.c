/*
 * The relay: how a consumer's main-queue events reach its poller without a
 * poll of the consumer's handle.
 *
 * Why: up to librdkafka 2.1, every rd_kafka_queue_poll() of a consumer's
 * handle — any queue of it, the main queue included — counts as the
 * application polling for max.poll.interval.ms. A poller serving the main
 * queue (statistics, errors, OAuth) would keep a consumer stuck in a long
 * block in its group, hiding exactly what that setting is for.
 *
 * How: the main queue is forwarded to librdkafka's background queue, whose
 * thread hands each event to relay_event (C only, never Ruby). It appends the
 * event to a locked FIFO and writes a byte to the client's wake-up pipe when
 * the FIFO was empty, as librdkafka's own queue wake-up would. The poller's
 * drain takes events from the FIFO (drain.c, through consumer.c's event
 * source), so nothing it does is a poll of the handle. Log lines come through
 * librdkafka's log callback instead (a log queue's lines would be printed by
 * the background thread, not relayed), as plain records in the same FIFO.
 */
#include "relay.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct relay {
    pthread_mutex_t lock;
    relay_item_t *items; /* ring buffer */
    size_t head, count, capa;
    int wake_w;  /* the client's pipe, -1 while there is none */
    int closing; /* the handle is being destroyed: events are dropped, not kept */
};

/* Appends an item; false when out of memory (the caller then drops it). */
static int push(relay_t *r, relay_item_t item) {
    pthread_mutex_lock(&r->lock);
    if (r->closing) {
        pthread_mutex_unlock(&r->lock);
        return 0;
    }
    if (r->count == r->capa) {
        size_t capa = r->capa ? r->capa * 2 : 64;
        relay_item_t *items = malloc(capa * sizeof(*items));
        if (!items) {
            pthread_mutex_unlock(&r->lock);
            return 0;
        }
        for (size_t i = 0; i < r->count; i++) items[i] = r->items[(r->head + i) % r->capa];
        free(r->items);
        r->items = items;
        r->head = 0;
        r->capa = capa;
    }
    r->items[(r->head + r->count++) % r->capa] = item;
    if (r->count == 1 && r->wake_w >= 0 && write(r->wake_w, "1", 1) < 0) {
        /* EAGAIN: a wake-up is pending already */
    }
    pthread_mutex_unlock(&r->lock);
    return 1;
}

/* background_event_cb: librdkafka's background thread. */
static void relay_event(rd_kafka_t *rk, rd_kafka_event_t *ev, void *opaque) {
    if (!push(opaque, (relay_item_t){.event = ev})) rd_kafka_event_destroy(ev);
}

/* log_cb: any librdkafka thread (rd_kafka_new's caller too). */
static void relay_log(const rd_kafka_t *rk, int level, const char *fac, const char *line) {
    relay_item_t item = {.level = level, .fac = strdup(fac ? fac : ""), .line = strdup(line ? line : "")};
    if (!item.fac || !item.line || !push(rd_kafka_opaque(rk), item)) sluice_event_item_free(&item);
}


relay_t *sluice_relay_attach(rd_kafka_conf_t *conf) {
    relay_t *r = calloc(1, sizeof(*r));
    if (!r) return NULL;
    pthread_mutex_init(&r->lock, NULL);
    r->wake_w = -1;
    rd_kafka_conf_set_opaque(conf, r);
    rd_kafka_conf_set_background_event_cb(conf, relay_event);
    rd_kafka_conf_set(conf, "log.queue", "false", NULL, 0);
    rd_kafka_conf_set_log_cb(conf, relay_log);
    return r;
}

void sluice_relay_start(relay_t *r, rd_kafka_t *rk, rd_kafka_queue_t *main_queue) {
    rd_kafka_queue_t *background = rd_kafka_queue_get_background(rk);
    rd_kafka_queue_forward(main_queue, background);
    rd_kafka_queue_destroy(background);
}

int sluice_relay_pop(relay_t *r, relay_item_t *out) {
    int found = 0;
    pthread_mutex_lock(&r->lock);
    if (r->count > 0) {
        *out = r->items[r->head];
        r->head = (r->head + 1) % r->capa;
        r->count--;
        found = 1;
    }
    pthread_mutex_unlock(&r->lock);
    return found;
}

size_t sluice_relay_length(relay_t *r) {
    pthread_mutex_lock(&r->lock);
    size_t n = r->count;
    pthread_mutex_unlock(&r->lock);
    return n;
}

size_t sluice_relay_find_logs(relay_t *r, const char *fac, const char *needle, char *buf, size_t size) {
    size_t found = 0, used = 0;
    buf[0] = '\0';
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->count; i++) {
        const relay_item_t *item = &r->items[(r->head + i) % r->capa];
        if (item->event || strcmp(item->fac, fac) || !strstr(item->line, needle)) continue;
        const char *line = item->line, *thread_end = line[0] == '[' ? strstr(line, "]: ") : NULL;
        if (thread_end) line = thread_end + 3; /* "[thrd:app]: " says nothing to a user */
        int n = snprintf(buf + used, size - used, "%s%s", found ? "; " : "", line);
        if (n > 0) used += (size_t)n < size - used ? (size_t)n : size - used - 1;
        found++;
    }
    pthread_mutex_unlock(&r->lock);
    return found;
}

/* Where wake-ups go; events already waiting give one at once. */
void sluice_relay_set_pipe(relay_t *r, int wake_w) {
    pthread_mutex_lock(&r->lock);
    r->wake_w = wake_w;
    if (wake_w >= 0 && r->count > 0 && write(wake_w, "1", 1) < 0) {
        /* EAGAIN: a wake-up is pending already */
    }
    pthread_mutex_unlock(&r->lock);
}

/* Before rd_kafka_destroy: drops what is queued (the handle is still alive
 * for rd_kafka_event_destroy), and whatever comes meanwhile. */
void sluice_relay_close(relay_t *r) {
    pthread_mutex_lock(&r->lock);
    r->closing = 1;
    r->wake_w = -1;
    while (r->count > 0) {
        sluice_event_item_free(&r->items[r->head]);
        r->head = (r->head + 1) % r->capa;
        r->count--;
    }
    pthread_mutex_unlock(&r->lock);
}

/* After rd_kafka_destroy: the background thread is gone. */
void sluice_relay_free(relay_t *r) {
    pthread_mutex_destroy(&r->lock);
    free(r->items);
    free(r);
}
