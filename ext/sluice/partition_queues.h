/*
 * What partition_queues.c shares: a consumer's assigned partitions, each
 * with its own fetch queue taken off the consumer queue, so that #consume
 * (consume.c) takes from each in turn instead of in librdkafka's arrival
 * order. consumer.c adds and removes partitions as it answers rebalances; a
 * leaf (it calls no file of ours). Every call takes a NULL set as an empty one
 * (a consumer released, or whose set could not be allocated).
 */
#ifndef SLUICE_PARTITION_QUEUES_H
#define SLUICE_PARTITION_QUEUES_H

#include <librdkafka/rdkafka.h>

typedef struct partition_queues partition_queues_t;

/* An empty set (malloc'd; NULL without memory). */
partition_queues_t *sluice_partition_queues_new(void);

/* Each partition of list gets its queue, forwarded nowhere, waking wake_w when it goes from empty to not
 * empty. Before the assignment that fetches it: librdkafka then leaves the forwarding alone
 * (RD_KAFKA_Q_F_FWD_APP). A partition already in the set is kept as it is. Any thread, no GVL needed. */
void sluice_partition_queues_add(partition_queues_t *pq, rd_kafka_t *rk, const rd_kafka_topic_partition_list_t *list,
                                 int wake_w);

/* The partitions of list (NULL: all) handed back to back_to (the consumer queue): what their queues hold
 * moves there, and so does whatever librdkafka fetches for them later (outdated by then, librdkafka drops it
 * when polled), and our handles are destroyed. Any thread, no GVL needed. */
void sluice_partition_queues_remove(partition_queues_t *pq, const rd_kafka_topic_partition_list_t *list,
                                    rd_kafka_queue_t *back_to);

/*
 * Calls take(arg, queue, max) on the partitions' queues in turn, starting one further each call, giving
 * each a fair share of room per round (what is left divided among the partitions, at least one, at most
 * 64: a batch handed out of one drain holds every partition that had some), until
 * room is used up, a round took nothing, or take returns a negative number (it must stop: out of time, a
 * rebalance). take returns how many events it took. Holds the set's lock: add and remove wait.
 */
void sluice_partition_queues_take(partition_queues_t *pq, long room, long (*take)(void *arg, rd_kafka_queue_t *queue, long max),
                                  void *arg);

/* Events waiting in the partitions' queues, all together. */
size_t sluice_partition_queues_length(partition_queues_t *pq);

/* Frees the set: after remove(NULL), or in a forked child (whose librdkafka is not to be called: the
 * handles are the parent's and are not destroyed). */
void sluice_partition_queues_free(partition_queues_t *pq);

#endif
