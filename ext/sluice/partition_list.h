/*
 * partition_list.c: librdkafka's topic-partition lists and the Ruby arrays
 * that stand for them, for every call that takes or returns partitions
 * (consumer.c, consume.c, transactions.c, admin.c, drain.c).
 */
#ifndef SLUICE_PARTITION_LIST_H
#define SLUICE_PARTITION_LIST_H

#include "common.h"

/* [[topic, partition(, offset(, metadata))], ...] -> a new list (the caller destroys it). */
rd_kafka_topic_partition_list_t *sluice_partitions_from(VALUE ary);
/* A list (or NULL) -> [[topic, partition, offset, error_code], ...] */
VALUE sluice_partitions_to_ary(const rd_kafka_topic_partition_list_t *list);
/* A list (or NULL) -> [[topic, partition, offset, metadata or nil], ...] */
VALUE sluice_partitions_to_ary_with_metadata(const rd_kafka_topic_partition_list_t *list);

#endif
