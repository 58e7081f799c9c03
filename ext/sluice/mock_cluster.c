/*
 * Sluice::Native::MockCluster — librdkafka's mock cluster for users' specs
 * (lib/sluice/testing/mock_cluster.rb holds the policy: names of API keys and
 * errors, closing once, closing at exit). The struct owns one handle made only
 * to carry the cluster (rd_kafka_mock_cluster_new needs one) and the cluster;
 * #destroy releases both, once. Defined only where librdkafka installs its
 * mock header.
 */
#include "common.h"

#include "init.h"

#ifdef HAVE_LIBRDKAFKA_RDKAFKA_MOCK_H
#include <librdkafka/rdkafka_mock.h>
#include <pthread.h>
#include <stdlib.h>

typedef struct {
    rd_kafka_t *rk;
    rd_kafka_mock_cluster_t *mcluster;
    pid_t pid;
} mock_t;

/* Cluster first: its thread answers through the handle's. Joins threads: never with the GVL held. */
static void *release_nogvl(void *p) {
    mock_t *m = p;
    if (m->mcluster) rd_kafka_mock_cluster_destroy(m->mcluster);
    if (m->rk) rd_kafka_destroy(m->rk);
    m->mcluster = NULL;
    m->rk = NULL;
    return NULL;
}

static void *release_in_background(void *p) {
    release_nogvl(p);
    free(p);
    return NULL;
}

/* Collected open (Ruby closes every cluster at exit, so rarely): released in a detached thread. */
static void mock_free(void *p) {
    mock_t *m = p;
    mock_t *copy = m->rk && !sluice_forked(m->pid) ? malloc(sizeof(*m)) : NULL;
    pthread_t thr;
    pthread_attr_t attr;
    if (copy) {
        *copy = *m;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&thr, &attr, release_in_background, copy)) free(copy); /* leaked: better than a hang in GC */
        pthread_attr_destroy(&attr);
    }
    xfree(m);
}

static size_t mock_memsize(const void *p) { return sizeof(mock_t); }

static const rb_data_type_t mock_type = {
    .wrap_struct_name = "Sluice::Native::MockCluster",
    .function = {.dfree = mock_free, .dsize = mock_memsize},
    .flags = RUBY_TYPED_FREE_IMMEDIATELY,
};

static VALUE mock_alloc(VALUE klass) {
    mock_t *m;
    VALUE self = TypedData_Make_Struct(klass, mock_t, &mock_type, m);
    m->pid = sluice_current_pid;
    return self;
}

/* The cluster, or IOError once destroyed (or inherited through fork). */
static rd_kafka_mock_cluster_t *mock_open(VALUE self) {
    mock_t *m;
    TypedData_Get_Struct(self, mock_t, &mock_type, m);
    if (!m->mcluster || sluice_forked(m->pid)) rb_raise(rb_eIOError, "mock cluster closed");
    return m->mcluster;
}

/*
 * MockCluster.new(broker_count): a cluster of brokers 1..broker_count on
 * localhost ports. The carrier handle logs nothing (no log callback): the
 * cluster's own logs are librdkafka's internals, not the user's.
 */
static VALUE mock_initialize(VALUE self, VALUE broker_count) {
    mock_t *m;
    char errstr[512];
    int brokers = NUM2INT(broker_count);
    TypedData_Get_Struct(self, mock_t, &mock_type, m);
    if (m->rk) rb_raise(rb_eRuntimeError, "mock cluster already started");
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(conf, NULL);
    m->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (!m->rk) {
        rd_kafka_conf_destroy(conf);
        rb_raise(rb_eRuntimeError, "mock cluster: %s", errstr);
    }
    m->mcluster = rd_kafka_mock_cluster_new(m->rk, brokers);
    if (!m->mcluster) {
        rb_thread_call_without_gvl(release_nogvl, m, NULL, NULL);
        rb_raise(rb_eRuntimeError, "mock cluster: librdkafka could not start %d brokers", brokers);
    }
    return self;
}

/* #bootstraps -> "127.0.0.1:port,..." */
static VALUE mock_bootstraps(VALUE self) { return rb_str_new_cstr(rd_kafka_mock_cluster_bootstraps(mock_open(self))); }

/* #topic_create(name, partitions, replication_factor) -> librdkafka's result code */
static VALUE mock_topic_create(VALUE self, VALUE name, VALUE partitions, VALUE replication) {
    rd_kafka_mock_cluster_t *mc = mock_open(self);
    return INT2FIX(rd_kafka_mock_topic_create(mc, StringValueCStr(name), NUM2INT(partitions), NUM2INT(replication)));
}

/* #push_request_errors(api_key, [code, ...]): the next requests of api_key fail with these, one each */
static VALUE mock_push_request_errors(VALUE self, VALUE api_key, VALUE codes) {
    rd_kafka_mock_cluster_t *mc = mock_open(self);
    Check_Type(codes, T_ARRAY);
    long count = RARRAY_LEN(codes);
    if (count > 1024) rb_raise(rb_eArgError, "at most 1024 errors at once");
    rd_kafka_resp_err_t *errors = ALLOCA_N(rd_kafka_resp_err_t, count > 0 ? count : 1);
    for (long i = 0; i < count; i++) errors[i] = (rd_kafka_resp_err_t)NUM2INT(rb_ary_entry(codes, i));
    rd_kafka_mock_push_request_errors_array(mc, (int16_t)NUM2INT(api_key), (size_t)count, errors);
    return Qnil;
}

/* #clear_request_errors(api_key): the errors pushed for api_key and not yet answered are dropped */
static VALUE mock_clear_request_errors(VALUE self, VALUE api_key) {
    rd_kafka_mock_clear_request_errors(mock_open(self), (int16_t)NUM2INT(api_key));
    return Qnil;
}

/* #broker_set_down(id) / #broker_set_up(id) -> librdkafka's result code (-1: every broker) */
static VALUE mock_broker_set_down(VALUE self, VALUE id) {
    return INT2FIX(rd_kafka_mock_broker_set_down(mock_open(self), NUM2INT(id)));
}

static VALUE mock_broker_set_up(VALUE self, VALUE id) {
    return INT2FIX(rd_kafka_mock_broker_set_up(mock_open(self), NUM2INT(id)));
}

/* #broker_set_rtt(id, ms) -> librdkafka's result code: every answer of the broker waits ms first (0: none) */
static VALUE mock_broker_set_rtt(VALUE self, VALUE id, VALUE ms) {
    return INT2FIX(rd_kafka_mock_broker_set_rtt(mock_open(self), NUM2INT(id), NUM2INT(ms)));
}

#ifdef HAVE_RD_KAFKA_MOCK_GROUP_INITIAL_REBALANCE_DELAY_MS
/* #group_initial_rebalance_delay_ms(ms): how long a new group's first join waits for more members */
static VALUE mock_group_initial_rebalance_delay_ms(VALUE self, VALUE ms) {
    rd_kafka_mock_group_initial_rebalance_delay_ms(mock_open(self), NUM2INT(ms));
    return Qnil;
}
#endif

/* #destroy: releases the cluster and its handle, once (a second call, or one in a forked child, does nothing) */
static VALUE mock_destroy(VALUE self) {
    mock_t *m;
    TypedData_Get_Struct(self, mock_t, &mock_type, m);
    mock_t owned = *m;
    /* Forgotten before the release: a call from another thread meanwhile finds it closed, and a second #destroy nothing. */
    m->rk = NULL;
    m->mcluster = NULL;
    if (owned.rk && !sluice_forked(owned.pid)) rb_thread_call_without_gvl(release_nogvl, &owned, NULL, NULL);
    return Qnil;
}

void sluice_init_mock_cluster(void) {
    VALUE klass = rb_define_class_under(sluice_mNative, "MockCluster", rb_cObject);
    rb_define_alloc_func(klass, mock_alloc);
    rb_define_method(klass, "initialize", mock_initialize, 1);
    rb_define_method(klass, "bootstraps", mock_bootstraps, 0);
    rb_define_method(klass, "topic_create", mock_topic_create, 3);
    rb_define_method(klass, "push_request_errors", mock_push_request_errors, 2);
    rb_define_method(klass, "clear_request_errors", mock_clear_request_errors, 1);
    rb_define_method(klass, "broker_set_down", mock_broker_set_down, 1);
    rb_define_method(klass, "broker_set_up", mock_broker_set_up, 1);
    rb_define_method(klass, "broker_set_rtt", mock_broker_set_rtt, 2);
    rb_define_method(klass, "destroy", mock_destroy, 0);
#ifdef HAVE_RD_KAFKA_MOCK_GROUP_INITIAL_REBALANCE_DELAY_MS
    rb_define_method(klass, "group_initial_rebalance_delay_ms", mock_group_initial_rebalance_delay_ms, 1);
#endif
}
#else
void sluice_init_mock_cluster(void) {}
#endif
