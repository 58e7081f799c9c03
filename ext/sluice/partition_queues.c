/*
 * A consumer's partitions, each read from a queue of its own.
 *
 * librdkafka forwards every assigned partition's fetch queue into the one
 * consumer queue, in the order its fetch answers arrive: a whole answer of
 * one partition (up to max.partition.fetch.bytes, thousands of small
 * messages) before the next one's, and up to queued.min.messages each
 * fetched ahead. A reader that takes from the consumer queue sees a
 * partition's first message only after everything queued before it. Under
 * parallel consumption that was seconds: a partition assigned with no
 * committed offset kept none but its start until its first messages
 * finished, so a member that lost it meanwhile (its coordinator killed) left
 * it to be read again from offset 0 (issue 55).
 *
 * While a concurrent read runs (consumer.c's #own_partition_queues=), each
 * assigned partition's fetch queue is taken off the consumer queue
 * (rd_kafka_queue_forward to NULL, before the assignment for a partition
 * assigned later, which librdkafka's fetch start then leaves alone) and wakes
 * the consumer queue's pipe itself. Plain reads keep the one queue: the
 * bundled librdkafka's patch 0015 splits the prefetch limits among own
 * queues, which halved a plain read's rate. #consume
 * takes the consumer queue first (rebalances, errors, and anything a
 * partition forwarded before this), then a share of each partition's queue
 * in turn. Order within a partition is librdkafka's; across partitions
 * Kafka promises none.
 *
 * One lock: #consume's take (any thread, no GVL) against the rebalance
 * answers that add and remove partitions (another thread may answer, or
 * close). Nothing here calls Ruby.
 */
#include "partition_queues.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* At most this many events of one partition in a row: a batch handed out of a drain (each_batch's, a
 * concurrent read's first blocks) holds every partition that had some, whatever its size. */
#define TURN 64

typedef struct {
    char *topic;
    int32_t partition;
    rd_kafka_queue_t *queue;
} entry_t;

struct partition_queues {
    pthread_mutex_t lock;
    entry_t *entries;
    size_t count, capa;
    size_t next; /* where the next take starts: a rotation, so no partition always comes first */
};

partition_queues_t *sluice_partition_queues_new(void) {
    partition_queues_t *pq = calloc(1, sizeof(*pq));
    if (pq && pthread_mutex_init(&pq->lock, NULL) != 0) {
        free(pq);
        return NULL;
    }
    return pq;
}

static long find(const partition_queues_t *pq, const char *topic, int32_t partition) {
    for (size_t i = 0; i < pq->count; i++)
        if (pq->entries[i].partition == partition && !strcmp(pq->entries[i].topic, topic)) return (long)i;
    return -1;
}

/* Room for n more entries; 0 without memory (the partitions left out are read from the consumer queue, as
 * librdkafka forwards them: nothing is lost, only the turn-taking). */
static int reserve(partition_queues_t *pq, size_t n) {
    if (pq->count + n <= pq->capa) return 1;
    size_t capa = pq->capa ? pq->capa : 8;
    while (capa < pq->count + n) capa *= 2;
    entry_t *entries = realloc(pq->entries, capa * sizeof(*entries));
    if (!entries) return 0;
    pq->entries = entries;
    pq->capa = capa;
    return 1;
}

void sluice_partition_queues_add(partition_queues_t *pq, rd_kafka_t *rk, const rd_kafka_topic_partition_list_t *list,
                                 int wake_w) {
    if (!pq || !list || list->cnt == 0) return;
    pthread_mutex_lock(&pq->lock);
    if (reserve(pq, (size_t)list->cnt)) {
        for (int i = 0; i < list->cnt; i++) {
            const rd_kafka_topic_partition_t *tp = &list->elems[i];
            if (find(pq, tp->topic, tp->partition) >= 0) continue;
            char *topic = strdup(tp->topic);
            rd_kafka_queue_t *queue = topic ? rd_kafka_queue_get_partition(rk, tp->topic, tp->partition) : NULL;
            if (!queue) {
                free(topic);
                continue;
            }
            rd_kafka_queue_forward(queue, NULL);
            rd_kafka_queue_io_event_enable(queue, wake_w, "1", 1);
            pq->entries[pq->count++] = (entry_t){topic, tp->partition, queue};
        }
    }
    pthread_mutex_unlock(&pq->lock);
}

static void hand_back(entry_t *e, rd_kafka_queue_t *back_to) {
    rd_kafka_queue_io_event_enable(e->queue, -1, NULL, 0);
    rd_kafka_queue_forward(e->queue, back_to);
    rd_kafka_queue_destroy(e->queue);
    free(e->topic);
}

void sluice_partition_queues_remove(partition_queues_t *pq, const rd_kafka_topic_partition_list_t *list,
                                    rd_kafka_queue_t *back_to) {
    if (!pq) return;
    pthread_mutex_lock(&pq->lock);
    if (!list) {
        for (size_t i = 0; i < pq->count; i++) hand_back(&pq->entries[i], back_to);
        pq->count = 0;
    } else {
        for (int i = 0; i < list->cnt; i++) {
            long at = find(pq, list->elems[i].topic, list->elems[i].partition);
            if (at < 0) continue;
            hand_back(&pq->entries[at], back_to);
            pq->entries[at] = pq->entries[--pq->count]; /* the order of the turns does not matter */
        }
    }
    pthread_mutex_unlock(&pq->lock);
}

void sluice_partition_queues_take(partition_queues_t *pq, long room, long (*take)(void *arg, rd_kafka_queue_t *queue, long max),
                                  void *arg) {
    if (!pq) return;
    pthread_mutex_lock(&pq->lock);
    size_t count = pq->count;
    if (count > 0) {
        size_t start = pq->next++ % count;
        for (long took = 1; took > 0 && room > 0;) {
            long share = room / (long)count;
            share = share < 1 ? 1 : share > TURN ? TURN : share;
            took = 0;
            for (size_t j = 0; j < count && room > 0; j++) {
                long n = take(arg, pq->entries[(start + j) % count].queue, share < room ? share : room);
                if (n < 0) goto out;
                took += n;
                room -= n;
            }
        }
    }
out:
    pthread_mutex_unlock(&pq->lock);
}

size_t sluice_partition_queues_length(partition_queues_t *pq) {
    size_t length = 0;
    if (!pq) return 0;
    pthread_mutex_lock(&pq->lock);
    for (size_t i = 0; i < pq->count; i++) length += rd_kafka_queue_length(pq->entries[i].queue);
    pthread_mutex_unlock(&pq->lock);
    return length;
}

void sluice_partition_queues_free(partition_queues_t *pq) {
    if (!pq) return;
    for (size_t i = 0; i < pq->count; i++) free(pq->entries[i].topic);
    free(pq->entries);
    free(pq); /* the lock is not destroyed: in a forked child another thread of the parent may have held it */
}
