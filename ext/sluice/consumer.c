/*
 * Sluice::Native::Consumer — a minimal assign-and-read consumer.
 *
 * Internal: the specs and benchmarks read back what they produced with it. It
 * is not a public consumer API (no groups, no commits, no rebalances).
 */
#include "sluice.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

typedef struct {
    rd_kafka_t *rk;
    pid_t pid;
} consumer_t;

static void consumer_destroy_handle(consumer_t *c) {
    if (c->rk && !sluice_forked(c->pid)) {
        rd_kafka_consumer_close(c->rk);
        rd_kafka_destroy(c->rk);
    }
    c->rk = NULL;
}

static void *consumer_destroy_nogvl(void *p) {
    consumer_destroy_handle(p);
    return NULL;
}

static void *consumer_release_in_background(void *p) {
    consumer_destroy_handle(p);
    free(p);
    return NULL;
}

static void consumer_free(void *p) {
    consumer_t *c = p;
    /* Collected without #close: closing can wait on the broker, which must never
     * happen inside GC with the GVL held — a detached thread does it. */
    consumer_t *copy = c->rk && !sluice_forked(c->pid) ? malloc(sizeof(*copy)) : NULL;
    if (copy) {
        pthread_t thr;
        pthread_attr_t attr;
        *copy = *c;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&thr, &attr, consumer_release_in_background, copy)) consumer_release_in_background(copy);
        pthread_attr_destroy(&attr);
        c->rk = NULL;
    }
    xfree(c);
}

static size_t consumer_memsize(const void *p) { return sizeof(consumer_t); }

static const rb_data_type_t consumer_type = {
    .wrap_struct_name = "Sluice::Native::Consumer",
    .function = {.dfree = consumer_free, .dsize = consumer_memsize},
    .flags = RUBY_TYPED_FREE_IMMEDIATELY,
};

static VALUE consumer_alloc(VALUE klass) {
    consumer_t *c;
    VALUE self = TypedData_Make_Struct(klass, consumer_t, &consumer_type, c);
    c->pid = sluice_current_pid;
    return self;
}

static consumer_t *consumer_open(VALUE self) {
    consumer_t *c;
    TypedData_Get_Struct(self, consumer_t, &consumer_type, c);
    if (!c->rk || sluice_forked(c->pid)) rb_raise(rb_eIOError, "consumer is closed");
    return c;
}

/* Consumer.new([[name, value], ...]) */
static VALUE consumer_initialize(VALUE self, VALUE pairs) {
    consumer_t *c;
    TypedData_Get_Struct(self, consumer_t, &consumer_type, c);
    char errstr[512];
    Check_Type(pairs, T_ARRAY);
    for (long i = 0; i < RARRAY_LEN(pairs); i++) {
        VALUE pair = rb_ary_entry(pairs, i);
        Check_Type(pair, T_ARRAY);
        VALUE k = rb_ary_entry(pair, 0), v = rb_ary_entry(pair, 1);
        StringValueCStr(k);
        StringValueCStr(v);
    }
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    for (long i = 0; i < RARRAY_LEN(pairs); i++) {
        VALUE pair = rb_ary_entry(pairs, i);
        VALUE k = rb_ary_entry(pair, 0), v = rb_ary_entry(pair, 1);
        if (rd_kafka_conf_set(conf, StringValueCStr(k), StringValueCStr(v), errstr, sizeof(errstr))) {
            rd_kafka_conf_destroy(conf);
            rb_raise(sluice_eConfigurationInvalid, "%s", errstr);
        }
    }
    c->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (!c->rk) {
        rd_kafka_conf_destroy(conf);
        rb_raise(sluice_eConfigurationInvalid, "%s", errstr);
    }
    rd_kafka_poll_set_consumer(c->rk);
    return self;
}

/* #assign([[topic, partition, offset], ...]) — offset -2 is the beginning */
static VALUE consumer_assign(VALUE self, VALUE assignments) {
    consumer_t *c = consumer_open(self);
    Check_Type(assignments, T_ARRAY);
    for (long i = 0; i < RARRAY_LEN(assignments); i++) {
        VALUE a = rb_ary_entry(assignments, i), topic = rb_ary_entry(a, 0);
        StringValueCStr(topic);
        NUM2INT(rb_ary_entry(a, 1));
        NUM2LL(rb_ary_entry(a, 2));
    }
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new((int)RARRAY_LEN(assignments));
    for (long i = 0; i < RARRAY_LEN(assignments); i++) {
        VALUE a = rb_ary_entry(assignments, i), topic = rb_ary_entry(a, 0);
        rd_kafka_topic_partition_list_add(list, StringValueCStr(topic), NUM2INT(rb_ary_entry(a, 1)))->offset =
            NUM2LL(rb_ary_entry(a, 2));
    }
    rd_kafka_resp_err_t err = rd_kafka_assign(c->rk, list);
    rd_kafka_topic_partition_list_destroy(list);
    if (err) rb_raise(rb_eRuntimeError, "assign failed: %s", rd_kafka_err2str(err));
    return Qnil;
}

struct poll_args {
    consumer_t *c;
    int timeout_ms;
    volatile int interrupted;
    rd_kafka_message_t *msg;
};

static void *poll_nogvl(void *p) {
    struct poll_args *a = p;
    double deadline = sluice_now_ms() + a->timeout_ms;
    do {
        double left = deadline - sluice_now_ms();
        a->msg = rd_kafka_consumer_poll(a->c->rk, left > 100 ? 100 : (left > 0 ? (int)left : 0));
    } while (!a->msg && !a->interrupted && sluice_now_ms() < deadline);
    return NULL;
}

static void poll_ubf(void *p) { ((struct poll_args *)p)->interrupted = 1; }

static VALUE bytes_or_nil(const void *p, size_t len) { return p ? rb_str_new(p, (long)len) : Qnil; }

/*
 * #poll(timeout_ms) -> nil or
 *   [topic, partition, offset, key, payload, [[header, value], ...], timestamp_ms, error_code]
 */
static VALUE consumer_poll(VALUE self, VALUE timeout) {
    consumer_t *c = consumer_open(self);
    struct poll_args a = {c, NUM2INT(timeout), 0, NULL};
    rb_thread_call_without_gvl(poll_nogvl, &a, poll_ubf, &a);
    if (!a.msg) {
        if (a.interrupted) rb_thread_check_ints();
        return Qnil;
    }
    rd_kafka_message_t *m = a.msg;
    VALUE headers = rb_ary_new();
    rd_kafka_headers_t *hdrs = NULL;
    if (!m->err && !rd_kafka_message_headers(m, &hdrs)) {
        const char *name;
        const void *val;
        size_t size;
        for (size_t i = 0; !rd_kafka_header_get_all(hdrs, i, &name, &val, &size); i++)
            rb_ary_push(headers, rb_ary_new_from_args(2, rb_str_new_cstr(name), bytes_or_nil(val, size)));
    }
    VALUE out = rb_ary_new_from_args(8, m->rkt ? rb_str_new_cstr(rd_kafka_topic_name(m->rkt)) : Qnil,
                                     INT2FIX(m->partition), LL2NUM(m->offset), bytes_or_nil(m->key, m->key_len),
                                     bytes_or_nil(m->payload, m->len), headers, LL2NUM(rd_kafka_message_timestamp(m, NULL)),
                                     INT2FIX(m->err));
    rd_kafka_message_destroy(m);
    return out;
}

static VALUE consumer_close(VALUE self) {
    consumer_t *c;
    TypedData_Get_Struct(self, consumer_t, &consumer_type, c);
    if (c->rk) rb_thread_call_without_gvl(consumer_destroy_nogvl, c, RUBY_UBF_IO, NULL);
    return Qnil;
}

void sluice_init_consumer(void) {
    VALUE cConsumer = rb_define_class_under(sluice_mNative, "Consumer", rb_cObject);
    rb_define_alloc_func(cConsumer, consumer_alloc);
    rb_define_method(cConsumer, "initialize", consumer_initialize, 1);
    rb_define_method(cConsumer, "assign", consumer_assign, 1);
    rb_define_method(cConsumer, "poll", consumer_poll, 1);
    rb_define_method(cConsumer, "close", consumer_close, 0);
}
