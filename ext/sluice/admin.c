/*
 * Sluice::Native::Client — admin: partition counts from metadata, and topic
 * creation for the specs and benchmarks (topics are created up front).
 */
#include "client.h"

struct metadata_args {
    client_t *c;
    const char *topic;
    int timeout_ms;
    rd_kafka_resp_err_t err;
    int count;
};

/* The topic reference lives only inside the call: nothing of the handle outlives the gate. */
static void *metadata_nogvl(void *p) {
    struct metadata_args *a = p;
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(a->c->rk, a->topic, NULL);
    if (!rkt) {
        a->err = rd_kafka_last_error();
        return NULL;
    }
    a->err = rd_kafka_metadata(a->c->rk, 0, rkt, &md, a->timeout_ms);
    if (!a->err && md) {
        if (md->topic_cnt == 1 && md->topics[0].err) a->err = md->topics[0].err;
        else if (md->topic_cnt == 1) a->count = md->topics[0].partition_cnt;
    }
    if (md) rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
    return NULL;
}

/* #partition_count(topic, timeout_ms) -> [error_code, count] (GVL released) */
static VALUE client_partition_count(VALUE self, VALUE topic, VALUE timeout) {
    client_t *c = sluice_client_open(self);
    struct metadata_args a = {c, StringValueCStr(topic), NUM2INT(timeout), RD_KAFKA_RESP_ERR__TIMED_OUT, 0};
    sluice_client_blocking(c, metadata_nogvl, &a, NULL, NULL, NULL);
    sluice_client_unblock(c);
    return rb_ary_new_from_args(2, INT2FIX(a.err), INT2FIX(a.count));
}

struct create_topics_args {
    client_t *c;
    rd_kafka_NewTopic_t **topics;
    size_t count;
    int timeout_ms;
    rd_kafka_event_t *result;
};

static void *create_topics_nogvl(void *p) {
    struct create_topics_args *a = p;
    rd_kafka_queue_t *q = rd_kafka_queue_new(a->c->rk);
    rd_kafka_AdminOptions_t *opts = rd_kafka_AdminOptions_new(a->c->rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_AdminOptions_set_operation_timeout(opts, a->timeout_ms, NULL, 0);
    rd_kafka_CreateTopics(a->c->rk, a->topics, a->count, opts, q);
    a->result = rd_kafka_queue_poll(q, a->timeout_ms + 1000);
    rd_kafka_AdminOptions_destroy(opts);
    rd_kafka_queue_destroy(q);
    return NULL;
}

/* The topic specs are the caller's: freed after the call, or when the gate raises instead. */
static void release_new_topics(void *p) {
    struct create_topics_args *a = p;
    for (size_t i = 0; i < a->count; i++) rd_kafka_NewTopic_destroy(a->topics[i]);
    a->count = 0;
}

/*
 * #create_topics([[name, partitions, [[config, value], ...]], ...], timeout_ms)
 *   -> [[name, error_code, message], ...]
 * For tests and benchmarks (topics created up front), not part of the public API.
 */
static VALUE client_create_topics(VALUE self, VALUE specs, VALUE timeout) {
    client_t *c = sluice_client_open(self);
    Check_Type(specs, T_ARRAY);
    long n = RARRAY_LEN(specs);
    for (long i = 0; i < n; i++) { /* check first: nothing native is allocated yet */
        VALUE spec = rb_ary_entry(specs, i);
        Check_Type(spec, T_ARRAY);
        sluice_cstr_at(spec, 0);
        NUM2INT(rb_ary_entry(spec, 1));
        VALUE cfg = rb_ary_entry(spec, 2);
        if (!NIL_P(cfg)) {
            Check_Type(cfg, T_ARRAY); /* [[name, value], ...] */
            for (long j = 0; j < RARRAY_LEN(cfg); j++) {
                sluice_cstr_at(RARRAY_AREF(cfg, j), 0);
                sluice_cstr_at(RARRAY_AREF(cfg, j), 1);
            }
        }
    }
    char errstr[512];
    struct create_topics_args a = {c, ALLOCA_N(rd_kafka_NewTopic_t *, n > 0 ? n : 1), 0, NUM2INT(timeout), NULL};
    VALUE out = rb_ary_new();
    for (long i = 0; i < n; i++) {
        VALUE spec = rb_ary_entry(specs, i), cfg = rb_ary_entry(spec, 2);
        rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(sluice_cstr_at(spec, 0), NUM2INT(rb_ary_entry(spec, 1)),
                                                        1, errstr, sizeof(errstr));
        if (!nt) {
            rb_ary_push(out, rb_ary_new_from_args(3, rb_ary_entry(spec, 0), INT2FIX(RD_KAFKA_RESP_ERR__INVALID_ARG),
                                                  rb_str_new_cstr(errstr)));
            continue;
        }
        if (!NIL_P(cfg))
            for (long j = 0; j < RARRAY_LEN(cfg); j++)
                rd_kafka_NewTopic_set_config(nt, sluice_cstr_at(RARRAY_AREF(cfg, j), 0), sluice_cstr_at(RARRAY_AREF(cfg, j), 1));
        a.topics[a.count++] = nt;
    }
    size_t sent = a.count;
    if (sent > 0) sluice_client_blocking(c, create_topics_nogvl, &a, NULL, NULL, release_new_topics);
    release_new_topics(&a);
    if (a.result) {
        const rd_kafka_CreateTopics_result_t *res = rd_kafka_event_CreateTopics_result(a.result);
        size_t cnt = 0;
        const rd_kafka_topic_result_t **results = res ? rd_kafka_CreateTopics_result_topics(res, &cnt) : NULL;
        if (!res)
            rb_ary_push(out, rb_ary_new_from_args(3, Qnil, INT2FIX(rd_kafka_event_error(a.result)),
                                                  sluice_str_or_nil(rd_kafka_event_error_string(a.result))));
        for (size_t i = 0; i < cnt; i++)
            rb_ary_push(out, rb_ary_new_from_args(3, rb_str_new_cstr(rd_kafka_topic_result_name(results[i])),
                                                  INT2FIX(rd_kafka_topic_result_error(results[i])),
                                                  sluice_str_or_nil(rd_kafka_topic_result_error_string(results[i]))));
        rd_kafka_event_destroy(a.result);
    } else if (sent > 0) {
        rb_ary_push(out, rb_ary_new_from_args(3, Qnil, INT2FIX(RD_KAFKA_RESP_ERR__TIMED_OUT), rb_str_new_cstr("timed out")));
    }
    if (sent > 0) sluice_client_unblock(c);
    return out;
}

void sluice_init_admin(VALUE klass) {
    rb_define_method(klass, "partition_count", client_partition_count, 2);
    rb_define_method(klass, "create_topics", client_create_topics, 2);
}
