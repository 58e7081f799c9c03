/*
 * Sluice::Native::Producer — the transactional API. Each call blocks (GVL
 * released) until the coordinator answered or its timeout passed, and cannot
 * be cut short: see txn_call.
 */
#include "client.h"
#include "consumer.h"
#include "gate.h"
#include "init.h"
#include "partition_list.h"
#include "values.h"


enum txn_op { TXN_INIT, TXN_BEGIN, TXN_COMMIT, TXN_ABORT };

struct txn_args {
    client_t *c;
    enum txn_op op;
    int timeout_ms;
    rd_kafka_error_t *error;
};

static void *txn_nogvl(void *p) {
    struct txn_args *a = p;
    switch (a->op) {
    case TXN_INIT: a->error = rd_kafka_init_transactions(a->c->rk, a->timeout_ms); break;
    case TXN_BEGIN: a->error = rd_kafka_begin_transaction(a->c->rk); break;
    case TXN_COMMIT: a->error = rd_kafka_commit_transaction(a->c->rk, a->timeout_ms); break;
    case TXN_ABORT: a->error = rd_kafka_abort_transaction(a->c->rk, a->timeout_ms); break;
    }
    return NULL;
}

/*
 * Transaction calls can't be cut short without desynchronising the transaction
 * state, so there is no unblock function: an interrupt is delivered when the
 * call returns (bounded by its timeout).
 */
static VALUE txn_call(VALUE self, enum txn_op op, int timeout_ms) {
    client_t *c = sluice_client_open(self);
    struct txn_args a = {c, op, timeout_ms, NULL};
    sluice_gate_enter(c, txn_nogvl, &a, NULL, NULL, NULL);
    VALUE tuple = sluice_error_tuple(a.error);
    sluice_gate_leave(c);
    return tuple;
}

/* Each returns nil or [code, message, fatal, retriable, txn_requires_abort]. */
static VALUE producer_init_transactions(VALUE self, VALUE t) { return txn_call(self, TXN_INIT, NUM2INT(t)); }
static VALUE producer_begin_transaction(VALUE self) { return txn_call(self, TXN_BEGIN, 0); }
static VALUE producer_commit_transaction(VALUE self, VALUE t) { return txn_call(self, TXN_COMMIT, NUM2INT(t)); }
static VALUE producer_abort_transaction(VALUE self, VALUE t) { return txn_call(self, TXN_ABORT, NUM2INT(t)); }

struct send_offsets_args {
    client_t *c;
    rd_kafka_topic_partition_list_t *offsets;
    rd_kafka_consumer_group_metadata_t *group;
    int timeout_ms;
    rd_kafka_error_t *error;
};

static void release_send_offsets(void *p) {
    struct send_offsets_args *a = p;
    rd_kafka_consumer_group_metadata_destroy(a->group);
    rd_kafka_topic_partition_list_destroy(a->offsets);
}

static void *send_offsets_nogvl(void *p) {
    struct send_offsets_args *a = p;
    a->error = rd_kafka_send_offsets_to_transaction(a->c->rk, a->offsets, a->group, a->timeout_ms);
    return NULL;
}

/*
 * #send_offsets_to_transaction(consumer, [[topic, partition, next_offset], ...], timeout_ms)
 *   -> nil or [code, message, fatal, retriable, txn_requires_abort]
 * The consumer's offsets join the open transaction, with the consumer's group
 * metadata: they commit (or abort) with what the transaction produced.
 */
static VALUE producer_send_offsets_to_transaction(VALUE self, VALUE consumer, VALUE offsets, VALUE timeout) {
    client_t *c = sluice_client_open(self);
    client_t *group_client = sluice_consumer_open(consumer);
    struct send_offsets_args a = {c, sluice_partitions_from(offsets), NULL, NUM2INT(timeout), NULL};
    a.group = rd_kafka_consumer_group_metadata(group_client->rk);
    sluice_gate_enter(c, send_offsets_nogvl, &a, NULL, NULL, release_send_offsets);
    release_send_offsets(&a);
    VALUE tuple = sluice_error_tuple(a.error);
    sluice_gate_leave(c);
    return tuple;
}

void sluice_init_transactions(VALUE klass) {
    rb_define_method(klass, "send_offsets_to_transaction", producer_send_offsets_to_transaction, 3);
    rb_define_method(klass, "init_transactions", producer_init_transactions, 1);
    rb_define_method(klass, "begin_transaction", producer_begin_transaction, 0);
    rb_define_method(klass, "commit_transaction", producer_commit_transaction, 1);
    rb_define_method(klass, "abort_transaction", producer_abort_transaction, 1);
}
