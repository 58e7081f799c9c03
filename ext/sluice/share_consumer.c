/*
 * Native::ShareConsumer: one librdkafka share consumer (KIP-932, librdkafka
 * 2.15.0's preview API), its one owner. Policy (acknowledgement modes, stop,
 * the close's bound, events) is lib/sluice/share_consumer.rb's.
 *
 * Not a Native::Client: librdkafka hands out no rd_kafka_t, main queue or
 * wake-up pipe for a share consumer (rd_kafka_share_t is opaque), so there is
 * nothing for the shared poller to wait on, and nothing to drain. The handle
 * is single-threaded by design (librdkafka refuses concurrent use with
 * __CONFLICT) and has no wakeup: Ruby calls it from one thread at a time and
 * waits in bounded #poll slices.
 *
 * One owner, one release: the handle is closed and destroyed once, by
 * #close_start's thread (a pthread of ours: rd_kafka_share_consumer_close
 * takes no timeout, so Ruby waits for that thread at most its own bound, and
 * leaves the rest to it), or by GC (the same thread, never in GC itself). A
 * forked child never touches the parent's handle.
 *
 * No Ruby code runs in librdkafka frames: the acknowledgement-commit callback
 * only copies its results into a list of our own (mutex-guarded: it may run
 * on a librdkafka thread), which #take_commits hands Ruby.
 */
#include "common.h"

#include "client.h"
#include "init.h"
#include "partition_list.h"
#include "values.h"

#if RD_KAFKA_VERSION >= 0x020f0000
#include <pthread.h>
#include <ruby/thread.h>

/* One acknowledgement-commit result: a partition's acknowledged offsets and their error. */
typedef struct commit_result {
    struct commit_result *next;
    char *topic;
    int32_t partition;
    int err;
    size_t count;
    int64_t *offsets;
} commit_result_t;

typedef struct {
    rd_kafka_share_t *rks;  /* the handle (NULL: never created, or GC freed the object) */
    rd_kafka_share_t *closing_rks; /* what the closing thread closes and destroys */
    pid_t pid;
    int closing;            /* #close_start ran: every call is refused */
    pthread_mutex_t lock;   /* guards commits and the closing thread's state */
    pthread_cond_t done_cond;
    int done;               /* the closing thread finished */
    int close_err;          /* its close's error code (0: none) */
    commit_result_t *commits, **commits_tail;
    char *unsupported;      /* librdkafka's line saying the brokers have no share groups (the first) */
} share_t;

/*
 * What librdkafka says only in a debug line when the coordinator has no
 * ShareGroupHeartbeat (Kafka 3.x, or 4.x with share groups off): it marks the
 * coordinator dead and asks again, forever. The log callback keeps that line
 * (and nothing else: logs have no queue Ruby could serve, log.queue is off)
 * so Ruby can raise instead of waiting for records that never come. Ruby adds
 * "cgrp" to the debug contexts for it.
 */
static const char *const UNSUPPORTED = "ShareGroupHeartbeatRequest not supported by broker";

static void free_commits(commit_result_t *r) {
    while (r) {
        commit_result_t *next = r->next;
        free(r->topic);
        free(r->offsets);
        free(r);
        r = next;
    }
}

/* The acknowledgement-commit callback: librdkafka's thread or ours, no GVL. Copies only. */
static void on_commit(rd_kafka_share_t *rks, rd_kafka_share_partition_offsets_list_t *list, rd_kafka_resp_err_t err,
                      void *opaque) {
    share_t *s = opaque;
    size_t n = list ? rd_kafka_share_partition_offsets_list_count(list) : 0;
    for (size_t i = 0; i < n; i++) {
        const rd_kafka_share_partition_offsets_t *po = rd_kafka_share_partition_offsets_list_get(list, i);
        const rd_kafka_topic_partition_t *tp = rd_kafka_share_partition_offsets_partition(po);
        commit_result_t *r = calloc(1, sizeof(*r));
        if (!r) return;
        r->topic = strdup(tp->topic);
        r->partition = tp->partition;
        r->err = tp->err ? tp->err : err;
        r->count = rd_kafka_share_partition_offsets_offsets_cnt(po);
        r->offsets = calloc(r->count ? r->count : 1, sizeof(int64_t));
        if (!r->topic || !r->offsets) {
            free_commits(r);
            return;
        }
        memcpy(r->offsets, rd_kafka_share_partition_offsets_offsets(po), r->count * sizeof(int64_t));
        pthread_mutex_lock(&s->lock);
        *s->commits_tail = r;
        s->commits_tail = &r->next;
        pthread_mutex_unlock(&s->lock);
    }
}

static void free_struct(share_t *s);

/* librdkafka's log callback (its threads, no GVL): keeps the one line Ruby acts on. */
static void on_log(const rd_kafka_t *rk, int level, const char *fac, const char *line) {
    if (!strstr(line, UNSUPPORTED)) return;
    share_t *s = rd_kafka_opaque(rk);
    if (!s) return;
    pthread_mutex_lock(&s->lock);
    if (!s->unsupported) s->unsupported = strdup(line);
    pthread_mutex_unlock(&s->lock);
}

/* The closing thread: close (leaves the group, sends pending acknowledgements), then destroy. */
static void *close_thread(void *p) {
    share_t *s = p;
    rd_kafka_share_t *rks = s->closing_rks;
    rd_kafka_error_t *error = rd_kafka_share_consumer_close(rks);
    int code = error ? rd_kafka_error_code(error) : 0;
    if (error) rd_kafka_error_destroy(error);
    error = rd_kafka_share_destroy(rks);
    if (error) rd_kafka_error_destroy(error);
    pthread_mutex_lock(&s->lock);
    s->close_err = code;
    s->done = 1;
    pthread_cond_broadcast(&s->done_cond);
    int orphan = s->rks == NULL && s->pid == 0; /* GC freed the object: the struct is ours */
    pthread_mutex_unlock(&s->lock);
    if (orphan) free_struct(s);
    return NULL;
}

/* Starts the closing thread (once); 0 when it could not start. */
static int start_close(share_t *s) {
    if (s->closing) return 1;
    s->closing = 1;
    s->closing_rks = s->rks;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int ok = pthread_create(&t, &attr, close_thread, s) == 0;
    pthread_attr_destroy(&attr);
    if (!ok) s->done = 1;
    return ok;
}

static void free_struct(share_t *s) {
    free_commits(s->commits);
    free(s->unsupported);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->done_cond);
    free(s);
}

/* GC: the handle is closed by the closing thread (never here: close blocks), which then frees the struct. */
static void share_free(void *p) {
    share_t *s = p;
    if (!s->rks || sluice_forked(s->pid) || (!s->closing && !start_close(s))) {
        /* never created, the parent's (its closing thread is not in this process), or no thread could
         * start (the handle leaks rather than blocking GC): our memory only */
        free_struct(s);
        return;
    }
    pthread_mutex_lock(&s->lock);
    int running = !s->done;
    s->rks = NULL;
    s->pid = 0;
    pthread_mutex_unlock(&s->lock);
    if (!running) free_struct(s);
}

static size_t share_memsize(const void *p) { return sizeof(share_t); }

static const rb_data_type_t share_type = {"Sluice::Native::ShareConsumer", {NULL, share_free, share_memsize}, NULL, NULL,
                                          RUBY_TYPED_FREE_IMMEDIATELY};

static VALUE share_alloc(VALUE klass) {
    share_t *s = calloc(1, sizeof(share_t));
    if (!s) rb_raise(rb_eNoMemError, "share consumer");
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->done_cond, NULL);
    s->commits_tail = &s->commits;
    s->pid = sluice_current_pid;
    return TypedData_Wrap_Struct(klass, &share_type, s);
}

static share_t *share_get(VALUE self) {
    share_t *s;
    TypedData_Get_Struct(self, share_t, &share_type, s);
    return s;
}

static share_t *share_open(VALUE self) {
    share_t *s = share_get(self);
    if (sluice_forked(s->pid)) rb_raise(sluice_eForked, "share consumer was created in another process");
    if (!s->rks || s->closing) rb_raise(sluice_eConsumerClosed, "share consumer is closed");
    return s;
}

static VALUE error_or_nil(rd_kafka_error_t *error) { return error ? sluice_error_tuple(error) : Qnil; }

static VALUE code_or_nil(rd_kafka_resp_err_t err) {
    return err ? rb_ary_new_from_args(5, INT2FIX(err), rb_str_new_cstr(rd_kafka_err2str(err)), Qfalse, Qfalse, Qfalse)
               : Qnil;
}

/*
 * ShareConsumer.new(pairs): the handle, in explicit acknowledgement mode
 * whatever Ruby's mode (Ruby's implicit mode releases what a failed block
 * left, which librdkafka's implicit mode cannot). Logs are dropped: a share
 * consumer has no log queue Ruby could serve (log.queue off).
 */
static VALUE share_initialize(VALUE self, VALUE pairs) {
    share_t *s = share_get(self);
    if (s->rks || s->closing) rb_raise(rb_eRuntimeError, "share consumer already initialized");
    client_t none = {0}; /* client.c's conversion and checks (it asks a client whether it has a handle) */
    rd_kafka_conf_t *conf = sluice_conf_new(pairs, NULL, &none);
    char errstr[512];
    if (rd_kafka_conf_set(conf, "log.queue", "false", errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK ||
        rd_kafka_conf_set(conf, "share.acknowledgement.mode", "explicit", errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        rb_raise(sluice_eConfigurationInvalid, "%s", errstr);
    }
    rd_kafka_conf_set_log_cb(conf, on_log);
    rd_kafka_conf_set_opaque(conf, s);
    rd_kafka_share_t *rks = rd_kafka_share_consumer_new(conf, errstr, sizeof(errstr));
    if (!rks) {
        rd_kafka_conf_destroy(conf);
        rb_raise(sluice_eConfigurationInvalid, "%s", errstr);
    }
    s->rks = rks;
    rd_kafka_error_t *error = rd_kafka_share_set_acknowledgement_commit_cb(rks, on_commit, s);
    if (error) rd_kafka_error_destroy(error);
    return self;
}

/* #subscribe(topics) -> nil or an error tuple (asynchronous: returns at once) */
static VALUE share_subscribe(VALUE self, VALUE topics) {
    share_t *s = share_open(self);
    Check_Type(topics, T_ARRAY);
    long n = RARRAY_LEN(topics);
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new((int)n);
    for (long i = 0; i < n; i++) {
        VALUE t = rb_ary_entry(topics, i);
        if (!RB_TYPE_P(t, T_STRING)) {
            rd_kafka_topic_partition_list_destroy(list);
            rb_raise(rb_eTypeError, "topic must be a String");
        }
        rd_kafka_topic_partition_list_add(list, StringValueCStr(t), RD_KAFKA_PARTITION_UA);
    }
    rd_kafka_resp_err_t err = rd_kafka_share_subscribe(s->rks, list);
    rd_kafka_topic_partition_list_destroy(list);
    return code_or_nil(err);
}

struct poll_call {
    rd_kafka_share_t *rks;
    int timeout_ms;
    rd_kafka_messages_t *batch;
    rd_kafka_error_t *error;
};

static void *poll_nogvl(void *p) {
    struct poll_call *c = p;
    c->error = rd_kafka_share_poll(c->rks, c->timeout_ms, &c->batch);
    return NULL;
}

/* [topic, partition, offset, key, payload, timestamp_ms, raw_headers, delivery_count, error tuple or nil] */
static VALUE record_of(const rd_kafka_message_t *m) {
    int64_t ts = rd_kafka_message_timestamp(m, NULL);
    VALUE error = m->err ? rb_ary_new_from_args(5, INT2FIX(m->err), rb_str_new_cstr(rd_kafka_message_errstr(m)), Qfalse,
                                                Qfalse, Qfalse)
                         : Qnil;
    VALUE fields[9] = {m->rkt ? rb_str_new_cstr(rd_kafka_topic_name(m->rkt)) : Qnil,
                       INT2FIX(m->partition),
                       LL2NUM(m->offset),
                       sluice_bytes_or_nil(m->key, m->key_len),
                       sluice_bytes_or_nil(m->payload, m->len),
                       ts >= 0 ? LL2NUM(ts) : Qnil,
                       sluice_headers_of(m),
                       INT2FIX(rd_kafka_message_delivery_count(m)),
                       error};
    return rb_ary_new_from_values(9, fields);
}

struct poll_out {
    rd_kafka_messages_t *batch;
    VALUE records;
};

static VALUE convert_batch(VALUE p) {
    struct poll_out *o = (struct poll_out *)p;
    size_t n = rd_kafka_messages_count(o->batch);
    for (size_t i = 0; i < n; i++) rb_ary_push(o->records, record_of(rd_kafka_messages_get(o->batch, i)));
    return Qnil;
}

/*
 * #poll(timeout_ms) -> [error tuple or nil, [record, ...]]
 * Without the GVL and without an unblock function (librdkafka has no wakeup
 * for a share consumer): an interrupt is served when the call returns, so
 * Ruby keeps timeout_ms short (its poll slice). The batch is converted and
 * destroyed here: acknowledgements go by offset (#acknowledge).
 */
static VALUE share_poll(VALUE self, VALUE timeout_ms) {
    share_t *s = share_open(self);
    struct poll_call c = {s->rks, NUM2INT(timeout_ms), NULL, NULL};
    /* gvl2: an interrupt is left pending for Ruby's next check, after the batch is converted (or,
     * pending before the call, instead of it): what librdkafka handed out is never dropped here */
    rb_thread_call_without_gvl2(poll_nogvl, &c, NULL, NULL);
    VALUE error = error_or_nil(c.error);
    struct poll_out o = {c.batch, rb_ary_new()};
    int state = 0;
    if (c.batch) rb_protect(convert_batch, (VALUE)&o, &state);
    rd_kafka_messages_destroy(c.batch);
    if (state) rb_jump_tag(state);
    return rb_assoc_new(error, o.records);
}

/* #acknowledge(topic, partition, offset, type) -> nil or an error tuple; type 1 accept, 2 release, 3 reject */
static VALUE share_acknowledge(VALUE self, VALUE topic, VALUE partition, VALUE offset, VALUE type) {
    share_t *s = share_open(self);
    rd_kafka_resp_err_t err = rd_kafka_share_acknowledge_offset(s->rks, StringValueCStr(topic), NUM2INT(partition),
                                                                NUM2LL(offset), (rd_kafka_share_AcknowledgeType_t)NUM2INT(type));
    return code_or_nil(err);
}

struct commit_call {
    rd_kafka_share_t *rks;
    int timeout_ms;
    rd_kafka_topic_partition_list_t *partitions;
    rd_kafka_error_t *error;
};

static void *commit_sync_nogvl(void *p) {
    struct commit_call *c = p;
    c->error = rd_kafka_share_commit_sync(c->rks, c->timeout_ms, &c->partitions);
    return NULL;
}

/* #commit_sync(timeout_ms) -> [error tuple or nil, [[topic, partition, offset, error_code], ...]] (no GVL) */
static VALUE share_commit_sync(VALUE self, VALUE timeout_ms) {
    share_t *s = share_open(self);
    struct commit_call c = {s->rks, NUM2INT(timeout_ms), NULL, NULL};
    rb_thread_call_without_gvl2(commit_sync_nogvl, &c, NULL, NULL); /* gvl2: the list is destroyed first */
    VALUE error = error_or_nil(c.error);
    VALUE partitions = sluice_partitions_to_ary(c.partitions);
    if (c.partitions) rd_kafka_topic_partition_list_destroy(c.partitions);
    return rb_assoc_new(error, partitions);
}

/* #commit_async -> nil or an error tuple; the outcome comes through #take_commits */
static VALUE share_commit_async(VALUE self) { return error_or_nil(rd_kafka_share_commit_async(share_open(self)->rks)); }

/* #take_commits -> [[topic, partition, error_code, [offset, ...]], ...]: the callback's results so far */
static VALUE share_take_commits(VALUE self) {
    share_t *s = share_get(self);
    pthread_mutex_lock(&s->lock);
    commit_result_t *r = s->commits;
    s->commits = NULL;
    s->commits_tail = &s->commits;
    pthread_mutex_unlock(&s->lock);
    VALUE out = rb_ary_new();
    for (commit_result_t *i = r; i; i = i->next) {
        VALUE offsets = rb_ary_new_capa((long)i->count);
        for (size_t k = 0; k < i->count; k++) rb_ary_push(offsets, LL2NUM(i->offsets[k]));
        rb_ary_push(out, rb_ary_new_from_args(4, rb_str_new_cstr(i->topic), INT2FIX(i->partition), INT2FIX(i->err), offsets));
    }
    free_commits(r);
    return out;
}

/* #close_start -> true: the closing thread runs (close, then destroy); every later call is refused */
static VALUE share_close_start(VALUE self) {
    share_t *s = share_get(self);
    if (sluice_forked(s->pid) || !s->rks) return Qfalse;
    return start_close(s) ? Qtrue : Qfalse;
}

struct wait_call {
    share_t *s;
    int timeout_ms;
    int stop;
};

static void *wait_nogvl(void *p) {
    struct wait_call *w = p;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += w->timeout_ms / 1000;
    deadline.tv_nsec += (long)(w->timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&w->s->lock);
    while (!w->s->done && !w->stop) {
        if (pthread_cond_timedwait(&w->s->done_cond, &w->s->lock, &deadline)) break;
    }
    pthread_mutex_unlock(&w->s->lock);
    return NULL;
}

static void wait_ubf(void *p) {
    struct wait_call *w = p;
    pthread_mutex_lock(&w->s->lock);
    w->stop = 1;
    pthread_cond_broadcast(&w->s->done_cond);
    pthread_mutex_unlock(&w->s->lock);
}

/* #close_wait(timeout_ms) -> nil (closed), an error tuple (closed with an error) or false (still closing) */
static VALUE share_close_wait(VALUE self, VALUE timeout_ms) {
    share_t *s = share_get(self);
    if (!s->closing) return Qfalse;
    struct wait_call w = {s, NUM2INT(timeout_ms), 0};
    rb_thread_call_without_gvl(wait_nogvl, &w, wait_ubf, &w);
    pthread_mutex_lock(&s->lock);
    int done = s->done, err = s->close_err;
    pthread_mutex_unlock(&s->lock);
    if (!done) return Qfalse;
    return code_or_nil(err);
}

/* #unsupported -> librdkafka's line saying the brokers have no share groups, or nil */
static VALUE share_unsupported(VALUE self) {
    share_t *s = share_get(self);
    pthread_mutex_lock(&s->lock);
    VALUE line = s->unsupported ? rb_str_new_cstr(s->unsupported) : Qnil;
    pthread_mutex_unlock(&s->lock);
    return line;
}

#endif

/* ShareConsumer.supported? -> whether the librdkafka linked in has the share consumer (2.15.0 on) */
static VALUE share_supported_p(VALUE klass) {
#if RD_KAFKA_VERSION >= 0x020f0000
    return Qtrue;
#else
    return Qfalse;
#endif
}

void sluice_init_share_consumer(void) {
    VALUE cShare = rb_define_class_under(sluice_mNative, "ShareConsumer", rb_cObject);
    rb_define_singleton_method(cShare, "supported?", share_supported_p, 0);
#if RD_KAFKA_VERSION >= 0x020f0000
    rb_define_alloc_func(cShare, share_alloc);
    rb_define_method(cShare, "initialize", share_initialize, 1);
    rb_define_method(cShare, "subscribe", share_subscribe, 1);
    rb_define_method(cShare, "poll", share_poll, 1);
    rb_define_method(cShare, "acknowledge", share_acknowledge, 4);
    rb_define_method(cShare, "commit_sync", share_commit_sync, 1);
    rb_define_method(cShare, "commit_async", share_commit_async, 0);
    rb_define_method(cShare, "take_commits", share_take_commits, 0);
    rb_define_method(cShare, "close_start", share_close_start, 0);
    rb_define_method(cShare, "close_wait", share_close_wait, 1);
    rb_define_method(cShare, "unsupported", share_unsupported, 0);
#else
    rb_undef_alloc_func(cShare);
#endif
}
