/*
 * Sluice::Native::Client — one librdkafka producer handle and its main queue.
 *
 * Ownership: the struct owns rd_kafka_t, its main queue reference, an event a
 * blocking wait took off the queue, the wake-up pipe handed to librdkafka and
 * the in-flight table mapping message opaques to Ruby delivery handles. Each is
 * released exactly once, by #destroy or — when the Ruby object is collected
 * without it — by a detached native thread (rd_kafka_destroy can take seconds
 * and must never run inside GC with the GVL held).
 *
 * No librdkafka -> Ruby callback exists: the handle is created with the event
 * API (rd_kafka_conf_set_events) and #drain turns each event into plain data in
 * our own frame. User code runs later, in Ruby, where exceptions are caught.
 */
#include "sluice.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#define TOPIC_CACHE_MAX 64 /* beyond this, produce by name (librdkafka looks the topic up per message) */

typedef struct {
    char *name;
    size_t len;
    rd_kafka_topic_t *rkt;
} topic_entry_t;

typedef int32_t (*partitioner_fn)(const rd_kafka_topic_t *, const void *, size_t, int32_t, void *, void *);

typedef struct {
    rd_kafka_t *rk;
    rd_kafka_queue_t *queue;   /* main queue: delivery reports, errors, stats, oauth, logs */
    rd_kafka_event_t *pending; /* taken by a blocking #wait_events, served by the next #drain */
    partitioner_fn partitioner;
    pid_t pid;
    int closed;                /* set with the GVL held before destroying: every call is refused */
    int busy;                  /* GVL-released calls in flight (atomic); destroy waits for 0 */
    int wake_r, wake_w;        /* wake-up pipe for FD polling, -1 when disabled */
    int exhausted;             /* the last #drain stopped on its budget with events left */
    VALUE inflight;            /* Array: slot -> DeliveryHandle (nil when free) */
    int32_t *free_slots;       /* stack of free slots; capacity >= inflight length */
    long free_count, free_capa;
    long inflight_count;
    VALUE handle_class;        /* what #produce returns (Sluice::DeliveryHandle) */
    VALUE notifier;            /* given to every handle: wakes its waiters */
    topic_entry_t topics[TOPIC_CACHE_MAX]; /* topic handles, so produce skips librdkafka's by-name lookup */
    int topic_count;
} client_t;

static VALUE cClient;
static ID id_topic, id_payload, id_key, id_partition, id_partition_key, id_timestamp, id_headers, id_label;
static VALUE sym_error, sym_statistics, sym_oauthbearer_token_refresh, sym_log;
/* DeliveryHandle's fields (lib/sluice/delivery_handle.rb): set here on the hot paths */
static ID id_iv_topic, id_iv_label, id_iv_notifier, id_iv_partition, id_iv_offset;

/* ------------------------------------------------------------------ lifecycle */

static void client_mark(void *p) {
    client_t *c = p;
    rb_gc_mark_movable(c->inflight);
    rb_gc_mark_movable(c->handle_class);
    rb_gc_mark_movable(c->notifier);
}

static void client_compact(void *p) {
    client_t *c = p;
    c->inflight = rb_gc_location(c->inflight);
    c->handle_class = rb_gc_location(c->handle_class);
    c->notifier = rb_gc_location(c->notifier);
}

static void close_pipe(client_t *c) {
    if (c->wake_r >= 0) close(c->wake_r);
    if (c->wake_w >= 0) close(c->wake_w);
    c->wake_r = c->wake_w = -1;
}

/* Releases every native resource; runs without the GVL. */
static void release_native(client_t *c) {
    if (c->pending) rd_kafka_event_destroy(c->pending);
    c->pending = NULL;
    for (int i = 0; i < c->topic_count; i++) {
        rd_kafka_topic_destroy(c->topics[i].rkt);
        free(c->topics[i].name);
    }
    c->topic_count = 0;
    /* librdkafka must never write to a closed (possibly reused) fd number. */
    if (c->wake_w >= 0) rd_kafka_queue_io_event_enable(c->queue, -1, NULL, 0);
    rd_kafka_queue_destroy(c->queue);
    rd_kafka_destroy(c->rk);
    close_pipe(c);
    c->queue = NULL;
    c->rk = NULL;
}

static void *release_in_background(void *p) {
    release_native(p);
    free(p);
    return NULL;
}

static void client_free(void *p) {
    client_t *c = p;
    xfree(c->free_slots);
    if (!c->rk) {
        xfree(c);
        return;
    }
    if (sluice_forked(c->pid)) {
        /* A forked child never touches the parent's handle; our fd copies are ours to close. */
        for (int i = 0; i < c->topic_count; i++) free(c->topics[i].name);
        close_pipe(c);
        xfree(c);
        return;
    }
    /* Collected without #destroy: hand the (possibly slow) teardown to a detached thread. */
    client_t *copy = malloc(sizeof(*copy));
    pthread_t thr;
    pthread_attr_t attr;
    if (copy) {
        *copy = *c;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int failed = pthread_create(&thr, &attr, release_in_background, copy);
        pthread_attr_destroy(&attr);
        if (!failed) {
            xfree(c);
            return;
        }
        free(copy);
    }
    release_native(c); /* last resort: no thread could be started */
    xfree(c);
}

static size_t client_memsize(const void *p) {
    const client_t *c = p;
    return sizeof(*c) + (size_t)c->free_capa * sizeof(int32_t);
}

static const rb_data_type_t client_type = {
    .wrap_struct_name = "Sluice::Native::Client",
    .function = {.dmark = client_mark, .dfree = client_free, .dsize = client_memsize, .dcompact = client_compact},
    .flags = RUBY_TYPED_FREE_IMMEDIATELY,
};

static VALUE client_alloc(VALUE klass) {
    client_t *c;
    VALUE self = TypedData_Make_Struct(klass, client_t, &client_type, c);
    c->wake_r = c->wake_w = -1;
    c->inflight = c->handle_class = c->notifier = Qnil;
    c->pid = sluice_current_pid;
    return self;
}

static client_t *client_get(VALUE self) {
    client_t *c;
    TypedData_Get_Struct(self, client_t, &client_type, c);
    return c;
}

/* The struct of a usable handle; raises for a closed one or one inherited through fork. */
static client_t *client_open(VALUE self) {
    client_t *c = client_get(self);
    if (sluice_forked(c->pid))
        rb_raise(sluice_eForked, "this producer was created in process %d and cannot be used in forked process %d; "
                 "create a new producer in the child", (int)c->pid, (int)sluice_current_pid);
    if (c->closed || !c->rk) rb_raise(sluice_eProducerClosed, "producer is closed");
    return c;
}

static inline void busy_enter(client_t *c) { __atomic_add_fetch(&c->busy, 1, __ATOMIC_SEQ_CST); }
static inline void busy_leave(client_t *c) { __atomic_sub_fetch(&c->busy, 1, __ATOMIC_SEQ_CST); }

static partitioner_fn partitioner_named(const char *name) {
    static const struct { const char *name; partitioner_fn fn; } table[] = {
        {"consistent", rd_kafka_msg_partitioner_consistent},
        {"consistent_random", rd_kafka_msg_partitioner_consistent_random},
        {"murmur2", rd_kafka_msg_partitioner_murmur2},
        {"murmur2_random", rd_kafka_msg_partitioner_murmur2_random},
        {"fnv1a", rd_kafka_msg_partitioner_fnv1a},
        {"fnv1a_random", rd_kafka_msg_partitioner_fnv1a_random},
    };
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (!strcmp(table[i].name, name)) return table[i].fn;
    return NULL; /* "random": no key-based choice, librdkafka picks */
}

/*
 * Client.new([[name, value], ...]) — librdkafka properties as Strings.
 * Raises ConfigurationInvalidError with librdkafka's own message.
 */
/* The C string at ary[i], which must be a String without NUL bytes. */
static const char *cstr_at(VALUE ary, long i) {
    VALUE v = rb_ary_entry(ary, i);
    Check_Type(v, T_STRING);
    return StringValueCStr(v);
}

static VALUE client_initialize(VALUE self, VALUE pairs) {
    client_t *c = client_get(self);
    char errstr[512];
    Check_Type(pairs, T_ARRAY);
    long n = RARRAY_LEN(pairs);
    /* Convert everything first: nothing below may raise while conf is alive. */
    for (long i = 0; i < n; i++) {
        VALUE pair = rb_ary_entry(pairs, i);
        Check_Type(pair, T_ARRAY);
        if (RARRAY_LEN(pair) != 2) rb_raise(rb_eArgError, "config pairs must be [name, value]");
        cstr_at(pair, 0);
        cstr_at(pair, 1);
    }
    c->partitioner = rd_kafka_msg_partitioner_consistent_random;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    for (long i = 0; i < n; i++) {
        VALUE pair = rb_ary_entry(pairs, i);
        const char *name = cstr_at(pair, 0), *value = cstr_at(pair, 1);
        if (rd_kafka_conf_set(conf, name, value, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK) {
            rd_kafka_conf_destroy(conf);
            rb_raise(sluice_eConfigurationInvalid, "%s", errstr);
        }
        if (!strcmp(name, "partitioner")) c->partitioner = partitioner_named(value);
    }
    rd_kafka_conf_set(conf, "log.queue", "true", NULL, 0);
    rd_kafka_conf_set_events(conf, RD_KAFKA_EVENT_DR | RD_KAFKA_EVENT_ERROR | RD_KAFKA_EVENT_STATS |
                                       RD_KAFKA_EVENT_OAUTHBEARER_TOKEN_REFRESH);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (!rk) {
        rd_kafka_conf_destroy(conf); /* not taken over on failure */
        rb_raise(sluice_eConfigurationInvalid, "%s", errstr);
    }
    c->rk = rk;
    c->queue = rd_kafka_queue_get_main(rk);
    rd_kafka_set_log_queue(rk, NULL); /* logs become events on the main queue, never a librdkafka thread callback */
    c->pid = sluice_current_pid;
    RB_OBJ_WRITE(self, &c->inflight, rb_ary_new());
    return self;
}

/* ------------------------------------------------------------------ in-flight table */

static long slot_acquire(client_t *c, VALUE handle) {
    long slot;
    if (c->free_count > 0) {
        slot = c->free_slots[--c->free_count];
        rb_ary_store(c->inflight, slot, handle);
    } else {
        slot = RARRAY_LEN(c->inflight);
        if (slot >= INT32_MAX) rb_raise(rb_eRangeError, "too many messages in flight");
        if (slot >= c->free_capa) { /* grow first, so releasing a slot never allocates */
            long capa = c->free_capa ? c->free_capa * 2 : 1024;
            REALLOC_N(c->free_slots, int32_t, capa);
            c->free_capa = capa;
        }
        rb_ary_push(c->inflight, handle);
    }
    c->inflight_count++;
    return slot;
}

static VALUE slot_release(client_t *c, long slot) {
    if (slot < 0 || slot >= RARRAY_LEN(c->inflight)) return Qnil;
    VALUE handle = RARRAY_AREF(c->inflight, slot);
    if (NIL_P(handle)) return Qnil;
    RARRAY_ASET(c->inflight, slot, Qnil);
    c->free_slots[c->free_count++] = (int32_t)slot;
    c->inflight_count--;
    return handle;
}

/* The cached topic handle for name, or NULL (cache full, or librdkafka refused it). */
static rd_kafka_topic_t *topic_handle(client_t *c, const char *name, size_t len) {
    for (int i = 0; i < c->topic_count; i++)
        if (c->topics[i].len == len && !memcmp(c->topics[i].name, name, len)) return c->topics[i].rkt;
    if (c->topic_count == TOPIC_CACHE_MAX) return NULL;
    char *copy = malloc(len + 1);
    if (!copy) return NULL;
    memcpy(copy, name, len + 1);
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(c->rk, copy, NULL);
    if (!rkt) {
        free(copy);
        return NULL;
    }
    c->topics[c->topic_count++] = (topic_entry_t){copy, len, rkt};
    return rkt;
}

/* ------------------------------------------------------------------ message validation */

typedef struct {
    VALUE topic, payload, key, headers, label, partition_key;
    int32_t partition;
    int64_t timestamp; /* ms; -1 when not given (0 is a valid time: the epoch) */
    long header_count;
} message_t;

static NORETURN(void invalid(const char *fmt, ...));
static void invalid(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    VALUE msg = rb_vsprintf(fmt, ap);
    va_end(ap);
    rb_exc_raise(rb_exc_new_str(sluice_eMessageInvalid, msg));
}

static void check_topic(VALUE topic) {
    if (!RB_TYPE_P(topic, T_STRING)) invalid("topic must be a String, got %" PRIsVALUE, rb_obj_class(topic));
    long len = RSTRING_LEN(topic);
    if (len == 0 || len > 249) invalid("topic must be 1 to 249 characters long, got %ld", len);
    const char *s = RSTRING_PTR(topic);
    if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
        invalid("topic %+" PRIsVALUE " is not a legal topic name", topic);
    for (long i = 0; i < len; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
              ch == '_' || ch == '-'))
            invalid("topic %+" PRIsVALUE " has invalid characters (allowed: ASCII letters, digits, '.', '_', '-')",
                    topic);
    }
}

static int count_header(VALUE name, VALUE value, VALUE countp) {
    long *count = (long *)countp;
    if (!RB_TYPE_P(name, T_STRING)) invalid("header names must be Strings, got %+" PRIsVALUE, name);
    if (NIL_P(value) || RB_TYPE_P(value, T_STRING)) {
        (*count)++;
    } else if (RB_TYPE_P(value, T_ARRAY)) {
        for (long i = 0; i < RARRAY_LEN(value); i++)
            if (!RB_TYPE_P(RARRAY_AREF(value, i), T_STRING))
                invalid("header %+" PRIsVALUE " values must be Strings, got %+" PRIsVALUE, name, RARRAY_AREF(value, i));
        *count += RARRAY_LEN(value);
    } else {
        invalid("header %+" PRIsVALUE " must be a String or an Array of Strings, got %" PRIsVALUE, name,
                rb_obj_class(value));
    }
    return ST_CONTINUE;
}

/* librdkafka reads 0 as "not set" and stamps the current time: the epoch and
 * anything before it cannot be sent, so both forms refuse them. */
static int64_t timestamp_ms(VALUE ts) {
    int64_t ms;
    if (RB_INTEGER_TYPE_P(ts)) {
        if (!FIXNUM_P(ts)) invalid("timestamp %" PRIsVALUE " is out of range (milliseconds since the epoch)", ts);
        ms = NUM2LL(ts);
    } else if (rb_obj_is_kind_of(ts, rb_cTime)) {
        struct timespec t = rb_time_timespec(ts);
        ms = (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
    } else {
        invalid("timestamp must be a Time or Integer milliseconds, got %" PRIsVALUE, rb_obj_class(ts));
    }
    if (ms <= 0)
        invalid("timestamp %+" PRIsVALUE " is at or before the epoch: librdkafka would replace it with the current time", ts);
    return ms;
}

struct fields {
    message_t *m;
    VALUE partition, partition_key, timestamp;
    VALUE unknown; /* Array of unknown keys, or Qnil */
};

/* One pass over the (usually two-key) message Hash: cheaper than a lookup per known key. */
static int read_field(VALUE key, VALUE value, VALUE arg) {
    struct fields *f = (struct fields *)arg;
    ID id = SYMBOL_P(key) ? SYM2ID(key) : 0;
    if (id == id_topic) f->m->topic = value;
    else if (id == id_payload) f->m->payload = value;
    else if (id == id_key) f->m->key = value;
    else if (id == id_partition) f->partition = value;
    else if (id == id_partition_key) f->partition_key = value;
    else if (id == id_timestamp) f->timestamp = value;
    else if (id == id_headers) f->m->headers = value;
    else if (id == id_label) f->m->label = value;
    else {
        if (NIL_P(f->unknown)) f->unknown = rb_ary_new();
        rb_ary_push(f->unknown, key);
    }
    return ST_CONTINUE;
}

/*
 * Reads and checks a message Hash. Raises MessageInvalidError; allocates nothing
 * native, so a raise here loses nothing.
 */
static void message_read(VALUE hash, message_t *m) {
    if (!RB_TYPE_P(hash, T_HASH)) invalid("message must be a Hash, got %" PRIsVALUE, rb_obj_class(hash));
    m->topic = m->payload = m->key = m->headers = m->label = Qnil;
    struct fields f = {m, Qnil, Qnil, Qnil, Qnil};
    rb_hash_foreach(hash, read_field, (VALUE)&f);
    VALUE partition = f.partition, partition_key = f.partition_key, timestamp = f.timestamp;
    m->partition_key = partition_key;
    if (!NIL_P(f.unknown))
        invalid("unknown message keys: %" PRIsVALUE
                " (known: topic, payload, key, partition, partition_key, timestamp, headers, label)",
                rb_inspect(f.unknown));
    if (NIL_P(m->topic)) invalid("message needs a :topic");
    check_topic(m->topic);
    if (!NIL_P(m->payload) && !RB_TYPE_P(m->payload, T_STRING))
        invalid("payload must be a String or nil, got %" PRIsVALUE, rb_obj_class(m->payload));
    if (!NIL_P(m->key) && !RB_TYPE_P(m->key, T_STRING))
        invalid("key must be a String or nil, got %" PRIsVALUE, rb_obj_class(m->key));
    if (!NIL_P(partition_key) && !RB_TYPE_P(partition_key, T_STRING))
        invalid("partition_key must be a String, got %" PRIsVALUE, rb_obj_class(partition_key));
    m->partition = RD_KAFKA_PARTITION_UA;
    if (!NIL_P(partition)) {
        if (!RB_INTEGER_TYPE_P(partition)) invalid("partition must be an Integer, got %" PRIsVALUE, rb_obj_class(partition));
        if (!FIXNUM_P(partition)) invalid("partition must be -1 (any) or a partition number, got %" PRIsVALUE, partition);
        long long p = NUM2LL(partition);
        if (p < -1 || p > INT32_MAX) invalid("partition must be -1 (any) or a partition number, got %lld", p);
        m->partition = (int32_t)p;
    }
    m->timestamp = NIL_P(timestamp) ? -1 : timestamp_ms(timestamp);
    m->header_count = 0;
    if (!NIL_P(m->headers)) {
        if (!RB_TYPE_P(m->headers, T_HASH)) invalid("headers must be a Hash, got %" PRIsVALUE, rb_obj_class(m->headers));
        rb_hash_foreach(m->headers, count_header, (VALUE)&m->header_count);
    }
}

static int add_header(VALUE name, VALUE value, VALUE hdrsp) {
    rd_kafka_headers_t *hdrs = (rd_kafka_headers_t *)hdrsp;
    if (NIL_P(value)) {
        rd_kafka_header_add(hdrs, RSTRING_PTR(name), RSTRING_LEN(name), NULL, 0);
    } else if (RB_TYPE_P(value, T_STRING)) {
        rd_kafka_header_add(hdrs, RSTRING_PTR(name), RSTRING_LEN(name), RSTRING_PTR(value), RSTRING_LEN(value));
    } else {
        for (long i = 0; i < RARRAY_LEN(value); i++) {
            VALUE v = RARRAY_AREF(value, i);
            rd_kafka_header_add(hdrs, RSTRING_PTR(name), RSTRING_LEN(name), RSTRING_PTR(v), RSTRING_LEN(v));
        }
    }
    return ST_CONTINUE;
}

/* #validate(message) -> nil; raises MessageInvalidError. */
static VALUE client_validate(VALUE self, VALUE message) {
    message_t m;
    message_read(message, &m);
    return Qnil;
}

/* #handles(klass, notifier) — what #produce builds its handles from. */
static VALUE client_handles(VALUE self, VALUE klass, VALUE notifier) {
    client_t *c = client_get(self);
    Check_Type(klass, T_CLASS);
    RB_OBJ_WRITE(self, &c->handle_class, klass);
    RB_OBJ_WRITE(self, &c->notifier, notifier);
    return Qnil;
}

/*
 * #produce(message, partition = nil) -> DeliveryHandle, error code, or false
 *
 * Validates the message, builds its handle (@topic, @label, @notifier) and
 * enqueues it. Returns the librdkafka error code (Integer) when enqueuing
 * failed, and false — before enqueuing anything — when the message has a
 * partition_key and no partition: Ruby resolves the key, then calls again
 * with the partition. Keeps the GVL: rd_kafka_produceva only enqueues (it
 * never blocks without RD_KAFKA_MSG_F_BLOCK), and releasing the GVL would cost
 * more than the call.
 */
static VALUE client_produce(int argc, VALUE *argv, VALUE self) {
    VALUE message, partition;
    rb_scan_args(argc, argv, "11", &message, &partition);
    client_t *c = client_open(self);
    message_t m;
    message_read(message, &m);
    if (NIL_P(partition) && m.partition == RD_KAFKA_PARTITION_UA && !NIL_P(m.partition_key)) return Qfalse;
    if (!NIL_P(partition)) m.partition = NUM2INT(partition);
    const char *topic = StringValueCStr(m.topic);
    if (NIL_P(c->handle_class)) rb_raise(rb_eRuntimeError, "Client#handles was not called");

    VALUE handle = rb_obj_alloc(c->handle_class);
    rb_ivar_set(handle, id_iv_topic, m.topic);
    rb_ivar_set(handle, id_iv_label, m.label);
    rb_ivar_set(handle, id_iv_notifier, c->notifier);
    long slot = slot_acquire(c, handle);
    /* Nothing below raises: the slot is released on every failure path. */
    rd_kafka_vu_t vu[8];
    size_t n = 0;
    rd_kafka_topic_t *rkt = topic_handle(c, topic, (size_t)RSTRING_LEN(m.topic));
    if (rkt) vu[n].vtype = RD_KAFKA_VTYPE_RKT, vu[n++].u.rkt = rkt;
    else vu[n].vtype = RD_KAFKA_VTYPE_TOPIC, vu[n++].u.cstr = topic;
    vu[n].vtype = RD_KAFKA_VTYPE_MSGFLAGS, vu[n++].u.i = RD_KAFKA_MSG_F_COPY;
    vu[n].vtype = RD_KAFKA_VTYPE_OPAQUE, vu[n++].u.ptr = (void *)(uintptr_t)(slot + 1);
    if (m.partition != RD_KAFKA_PARTITION_UA) vu[n].vtype = RD_KAFKA_VTYPE_PARTITION, vu[n++].u.i32 = m.partition;
    if (!NIL_P(m.payload)) {
        vu[n].vtype = RD_KAFKA_VTYPE_VALUE;
        vu[n].u.mem.ptr = RSTRING_PTR(m.payload);
        vu[n++].u.mem.size = (size_t)RSTRING_LEN(m.payload);
    }
    if (!NIL_P(m.key)) {
        vu[n].vtype = RD_KAFKA_VTYPE_KEY;
        vu[n].u.mem.ptr = RSTRING_PTR(m.key);
        vu[n++].u.mem.size = (size_t)RSTRING_LEN(m.key);
    }
    if (m.timestamp >= 0) vu[n].vtype = RD_KAFKA_VTYPE_TIMESTAMP, vu[n++].u.i64 = m.timestamp;
    rd_kafka_headers_t *hdrs = NULL;
    if (m.header_count > 0) {
        hdrs = rd_kafka_headers_new((size_t)m.header_count);
        rb_hash_foreach(m.headers, add_header, (VALUE)hdrs);
        vu[n].vtype = RD_KAFKA_VTYPE_HEADERS, vu[n++].u.headers = hdrs;
    }
    rd_kafka_error_t *error = rd_kafka_produceva(c->rk, vu, n);
    if (!error) return handle;
    rd_kafka_resp_err_t code = rd_kafka_error_code(error);
    rd_kafka_error_destroy(error);
    if (hdrs) rd_kafka_headers_destroy(hdrs); /* only taken over on success */
    slot_release(c, slot);
    return INT2FIX(code);
}

/* ------------------------------------------------------------------ draining events */

static void push4(VALUE batch, VALUE a, VALUE b, VALUE c, VALUE d) {
    VALUE v[4] = {a, b, c, d};
    rb_ary_cat(batch, v, 4);
}

static VALUE str_or_nil(const char *s) { return s ? rb_str_new_cstr(s) : Qnil; }

/*
 * A successful delivery is recorded on its handle right here — @partition,
 * then @offset, which ends DeliveryHandle#pending? — because this is the one
 * per-message step of every produce; Ruby sees the handle again only when it
 * asked to (acks != 0: someone listens to message.acknowledged). A failed
 * delivery goes to Ruby whole, which builds the KafkaError.
 */
static void serve_event(client_t *c, rd_kafka_event_t *ev, VALUE batch, int acks) {
    switch (rd_kafka_event_type(ev)) {
    case RD_KAFKA_EVENT_DR: {
        const rd_kafka_message_t *msg;
        while ((msg = rd_kafka_event_message_next(ev))) {
            VALUE handle = slot_release(c, (long)(uintptr_t)msg->_private - 1);
            if (NIL_P(handle)) continue;
            if (msg->err) {
                push4(batch, handle, INT2FIX(msg->partition), LL2NUM(msg->offset), INT2FIX(msg->err));
                continue;
            }
            if (RB_OBJ_FROZEN(handle)) continue; /* someone froze it: it cannot take its report, and must not stop the drain */
            rb_ivar_set(handle, id_iv_partition, INT2FIX(msg->partition));
            rb_ivar_set(handle, id_iv_offset, LL2NUM(msg->offset));
            if (acks) push4(batch, handle, Qnil, Qnil, INT2FIX(0));
        }
        break;
    }
    case RD_KAFKA_EVENT_ERROR: {
        int fatal = rd_kafka_event_error_is_fatal(ev);
        rd_kafka_resp_err_t code = rd_kafka_event_error(ev);
        char reason[512];
        snprintf(reason, sizeof(reason), "%s", rd_kafka_event_error_string(ev));
        if (fatal) code = rd_kafka_fatal_error(c->rk, reason, sizeof(reason)); /* the underlying error */
        push4(batch, sym_error, INT2FIX(code), rb_str_new_cstr(reason), fatal ? Qtrue : Qfalse);
        break;
    }
    case RD_KAFKA_EVENT_STATS:
        push4(batch, sym_statistics, str_or_nil(rd_kafka_event_stats(ev)), Qnil, Qnil);
        break;
    case RD_KAFKA_EVENT_OAUTHBEARER_TOKEN_REFRESH:
        push4(batch, sym_oauthbearer_token_refresh, str_or_nil(rd_kafka_event_config_string(ev)), Qnil, Qnil);
        break;
    case RD_KAFKA_EVENT_LOG: {
        const char *fac = NULL, *str = NULL;
        int level = 6;
        rd_kafka_event_log(ev, &fac, &str, &level);
        push4(batch, sym_log, INT2FIX(level), str_or_nil(fac), str_or_nil(str));
        break;
    }
    default:
        break;
    }
}

/*
 * #drain(budget_ms, acks) -> Array or nil
 *
 * Non-blocking polls that keep the GVL, until the queue is empty or budget_ms
 * (negative: no budget) is spent. Successful deliveries are recorded on their
 * handles (see serve_event). Returns nil when nothing is left for Ruby, else a
 * flat Array of quads in queue order:
 *   handle, partition, offset, error_code   (a failed delivery, to resolve)
 *   handle, nil, nil, 0                     (delivered; only when acks is true)
 *   :error, code, reason, fatal
 *   :statistics, json, nil, nil
 *   :oauthbearer_token_refresh, config, nil, nil
 *   :log, level, facility, message
 * #exhausted? then tells whether the budget ran out with events left.
 */
static VALUE client_drain(VALUE self, VALUE budget, VALUE acks) {
    client_t *c = client_open(self);
    VALUE batch = rb_ary_new(); /* reused below, returned only when Ruby has work */
    double budget_ms = NUM2DBL(budget);
    double deadline = budget_ms < 0 ? INFINITY : sluice_now_ms() + budget_ms;
    c->exhausted = 0;
    for (;;) {
        rd_kafka_event_t *ev = c->pending ? c->pending : rd_kafka_queue_poll(c->queue, 0);
        c->pending = NULL;
        if (!ev) break;
        serve_event(c, ev, batch, RTEST(acks));
        rd_kafka_event_destroy(ev);
        if (sluice_now_ms() >= deadline) {
            c->exhausted = rd_kafka_queue_length(c->queue) > 0;
            break;
        }
    }
    return RARRAY_LEN(batch) ? batch : Qnil;
}

static VALUE client_exhausted_p(VALUE self) { return client_get(self)->exhausted ? Qtrue : Qfalse; }

struct wait_args {
    client_t *c;
    int timeout_ms;
    rd_kafka_event_t *ev;
};

static void *wait_events_nogvl(void *p) {
    struct wait_args *a = p;
    a->ev = rd_kafka_queue_poll(a->c->queue, a->timeout_ms);
    return NULL;
}

static void wait_events_ubf(void *p) { rd_kafka_queue_yield(((struct wait_args *)p)->c->queue); }

/*
 * #wait_events(timeout_ms) -> true if an event is ready for #drain
 *
 * The blocking poll of :thread mode: GVL released, interruptible (Thread#raise,
 * #kill, #interrupt_wait all yield the queue). The event it takes is kept for
 * the next #drain, which serves it with the GVL held.
 */
static VALUE client_wait_events(VALUE self, VALUE timeout) {
    client_t *c = client_open(self);
    if (c->pending) return Qtrue;
    struct wait_args a = {c, NUM2INT(timeout), NULL};
    busy_enter(c);
    rb_thread_call_without_gvl(wait_events_nogvl, &a, wait_events_ubf, &a);
    c->pending = a.ev;
    busy_leave(c);
    return a.ev ? Qtrue : Qfalse;
}

/* #interrupt_wait — makes a blocking #wait_events in another thread return now. */
static VALUE client_interrupt_wait(VALUE self) {
    client_t *c = client_get(self);
    if (c->queue && !c->closed && !sluice_forked(c->pid)) rd_kafka_queue_yield(c->queue);
    return Qnil;
}

/* #queue_length -> events waiting on the main queue */
static VALUE client_queue_length(VALUE self) {
    client_t *c = client_open(self);
    return SIZET2NUM(rd_kafka_queue_length(c->queue) + (c->pending ? 1 : 0));
}

/* #outq_len -> messages not yet delivered plus events not yet served */
static VALUE client_outq_len(VALUE self) { return INT2NUM(rd_kafka_outq_len(client_open(self)->rk)); }

static VALUE client_inflight_count(VALUE self) { return LONG2NUM(client_get(self)->inflight_count); }

/* ------------------------------------------------------------------ wake-up pipe (FD polling) */

/*
 * #wakeup_enable -> read fd
 *
 * Opens a non-blocking, close-on-exec pipe and hands its write end to
 * librdkafka: it writes one byte when the main queue goes from empty to
 * non-empty (a wake-up signal; the events stay on the queue). Events already
 * queued give no wake-up, so the caller must poll once after enabling.
 */
static VALUE client_wakeup_enable(VALUE self) {
    client_t *c = client_open(self);
    if (c->wake_r >= 0) return INT2FIX(c->wake_r);
    int fds[2];
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) < 0) rb_sys_fail("pipe2");
    c->wake_r = fds[0];
    c->wake_w = fds[1];
    rd_kafka_queue_io_event_enable(c->queue, c->wake_w, "1", 1);
    return INT2FIX(c->wake_r);
}

/* #wakeup_disable — IO events off first, then the pipe is closed. */
static VALUE client_wakeup_disable(VALUE self) {
    client_t *c = client_get(self);
    if (c->wake_w < 0) return Qnil;
    if (!sluice_forked(c->pid) && c->queue) rd_kafka_queue_io_event_enable(c->queue, -1, NULL, 0);
    close_pipe(c);
    return Qnil;
}

/* #wakeup_signal — writes a wake-up ourselves (a drain that ran out of budget re-arms). */
static VALUE client_wakeup_signal(VALUE self) {
    client_t *c = client_get(self);
    if (c->wake_w >= 0 && write(c->wake_w, "1", 1) < 0 && errno != EAGAIN) rb_sys_fail("write");
    return Qnil;
}

static VALUE client_wakeup_fd(VALUE self) {
    client_t *c = client_get(self);
    return c->wake_r >= 0 ? INT2FIX(c->wake_r) : Qnil;
}

/* ------------------------------------------------------------------ blocking operations */

struct flush_args {
    client_t *c;
    int timeout_ms;
    volatile int interrupted;
    rd_kafka_resp_err_t err;
};

static void *flush_nogvl(void *p) {
    struct flush_args *a = p;
    double deadline = a->timeout_ms < 0 ? INFINITY : sluice_now_ms() + a->timeout_ms;
    /* Short slices, so an interrupt or a concurrent close is noticed quickly. */
    for (;;) {
        double left = deadline - sluice_now_ms();
        int slice = left < 100 ? (int)(left > 0 ? left : 0) : 100;
        a->err = rd_kafka_flush(a->c->rk, slice);
        if (!a->err || a->interrupted || left <= 0 || __atomic_load_n(&a->c->closed, __ATOMIC_SEQ_CST)) break;
    }
    return NULL;
}

static void flush_ubf(void *p) { ((struct flush_args *)p)->interrupted = 1; }

/*
 * #flush(timeout_ms) -> true when every message has been delivered (or failed)
 * and its report taken off the queue, false on timeout.
 * With RD_KAFKA_EVENT_DR enabled rd_kafka_flush only waits for the message count
 * to reach zero: the poller must be serving the queue meanwhile.
 */
static VALUE client_flush(VALUE self, VALUE timeout) {
    client_t *c = client_open(self);
    struct flush_args a = {c, NUM2INT(timeout), 0, 0};
    busy_enter(c);
    rb_thread_call_without_gvl(flush_nogvl, &a, flush_ubf, &a);
    busy_leave(c);
    if (a.interrupted) rb_thread_check_ints();
    return a.err ? Qfalse : Qtrue;
}

struct purge_args {
    client_t *c;
    rd_kafka_resp_err_t err;
};

static void *purge_nogvl(void *p) {
    struct purge_args *a = p;
    a->err = rd_kafka_purge(a->c->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    return NULL;
}

/* #purge — drops queued and in-flight messages; each gets a delivery report with a purge error. */
static VALUE client_purge(VALUE self) {
    client_t *c = client_open(self);
    struct purge_args a = {c, 0};
    busy_enter(c);
    rb_thread_call_without_gvl(purge_nogvl, &a, RUBY_UBF_IO, NULL);
    busy_leave(c);
    return INT2FIX(a.err);
}

static VALUE error_tuple(rd_kafka_error_t *error) {
    if (!error) return Qnil;
    VALUE out = rb_ary_new_from_args(5, INT2FIX(rd_kafka_error_code(error)), rb_str_new_cstr(rd_kafka_error_string(error)),
                                     rd_kafka_error_is_fatal(error) ? Qtrue : Qfalse,
                                     rd_kafka_error_is_retriable(error) ? Qtrue : Qfalse,
                                     rd_kafka_error_txn_requires_abort(error) ? Qtrue : Qfalse);
    rd_kafka_error_destroy(error);
    return out;
}

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

/* Transaction calls can't be cut short without desynchronising the transaction
 * state, so an interrupt is delivered when the call returns (bounded by timeout). */
static void txn_ubf(void *p) {}

static VALUE txn_call(VALUE self, enum txn_op op, int timeout_ms) {
    client_t *c = client_open(self);
    struct txn_args a = {c, op, timeout_ms, NULL};
    busy_enter(c);
    rb_thread_call_without_gvl(txn_nogvl, &a, txn_ubf, &a);
    busy_leave(c);
    return error_tuple(a.error);
}

/* Each returns nil or [code, message, fatal, retriable, txn_requires_abort]. */
static VALUE client_init_transactions(VALUE self, VALUE t) { return txn_call(self, TXN_INIT, NUM2INT(t)); }
static VALUE client_begin_transaction(VALUE self) { return txn_call(self, TXN_BEGIN, 0); }
static VALUE client_commit_transaction(VALUE self, VALUE t) { return txn_call(self, TXN_COMMIT, NUM2INT(t)); }
static VALUE client_abort_transaction(VALUE self, VALUE t) { return txn_call(self, TXN_ABORT, NUM2INT(t)); }

struct metadata_args {
    client_t *c;
    rd_kafka_topic_t *rkt;
    int timeout_ms;
    rd_kafka_resp_err_t err;
    int count;
};

static void *metadata_nogvl(void *p) {
    struct metadata_args *a = p;
    const struct rd_kafka_metadata *md = NULL;
    a->err = rd_kafka_metadata(a->c->rk, 0, a->rkt, &md, a->timeout_ms);
    if (!a->err && md) {
        if (md->topic_cnt == 1 && md->topics[0].err) a->err = md->topics[0].err;
        else if (md->topic_cnt == 1) a->count = md->topics[0].partition_cnt;
    }
    if (md) rd_kafka_metadata_destroy(md);
    return NULL;
}

/* #partition_count(topic, timeout_ms) -> [error_code, count] (GVL released) */
static VALUE client_partition_count(VALUE self, VALUE topic, VALUE timeout) {
    client_t *c = client_open(self);
    struct metadata_args a = {c, NULL, NUM2INT(timeout), 0, 0};
    a.rkt = rd_kafka_topic_new(c->rk, StringValueCStr(topic), NULL);
    if (!a.rkt) return rb_ary_new_from_args(2, INT2FIX(rd_kafka_last_error()), INT2FIX(0));
    busy_enter(c);
    rb_thread_call_without_gvl(metadata_nogvl, &a, RUBY_UBF_IO, NULL);
    busy_leave(c);
    rd_kafka_topic_destroy(a.rkt);
    return rb_ary_new_from_args(2, INT2FIX(a.err), INT2FIX(a.count));
}

/*
 * #partition_for(partition_key, partition_count) -> Integer
 * The configured partitioner applied to a key that is not the message key.
 * librdkafka's key-hashing partitioners don't touch the topic for a non-empty
 * key; an empty key or the "random" partitioner leaves the choice to librdkafka.
 */
static VALUE client_partition_for(VALUE self, VALUE key, VALUE count) {
    client_t *c = client_get(self);
    StringValue(key);
    int32_t cnt = NUM2INT(count);
    if (!c->partitioner || RSTRING_LEN(key) == 0 || cnt <= 0) return INT2FIX(RD_KAFKA_PARTITION_UA);
    return INT2FIX(c->partitioner(NULL, RSTRING_PTR(key), (size_t)RSTRING_LEN(key), cnt, NULL, NULL));
}

/* #oauthbearer_set_token(token, lifetime_ms, principal, extensions) -> nil or [code, message] */
static VALUE client_oauthbearer_set_token(VALUE self, VALUE token, VALUE lifetime, VALUE principal, VALUE extensions) {
    client_t *c = client_open(self);
    char errstr[512];
    Check_Type(extensions, T_ARRAY);
    long n = RARRAY_LEN(extensions);
    const char **ext = ALLOCA_N(const char *, n > 0 ? n : 1);
    for (long i = 0; i < n; i++) ext[i] = cstr_at(extensions, i);
    const char *tok = StringValueCStr(token), *princ = StringValueCStr(principal);
    rd_kafka_resp_err_t err = rd_kafka_oauthbearer_set_token(c->rk, tok, NUM2LL(lifetime), princ, ext, (size_t)n,
                                                             errstr, sizeof(errstr));
    if (!err) return Qnil;
    return rb_ary_new_from_args(2, INT2FIX(err), rb_str_new_cstr(errstr));
}

static VALUE client_oauthbearer_set_token_failure(VALUE self, VALUE reason) {
    client_t *c = client_open(self);
    return INT2FIX(rd_kafka_oauthbearer_set_token_failure(c->rk, StringValueCStr(reason)));
}

/* #fatal_error -> nil or [code, reason] */
static VALUE client_fatal_error(VALUE self) {
    client_t *c = client_open(self);
    char reason[512];
    rd_kafka_resp_err_t err = rd_kafka_fatal_error(c->rk, reason, sizeof(reason));
    return err ? rb_ary_new_from_args(2, INT2FIX(err), rb_str_new_cstr(reason)) : Qnil;
}

static VALUE client_name(VALUE self) { return rb_str_new_cstr(rd_kafka_name(client_open(self)->rk)); }

/* ------------------------------------------------------------------ admin: create topics */

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

/*
 * #create_topics([[name, partitions, [[config, value], ...]], ...], timeout_ms)
 *   -> [[name, error_code, message], ...]
 * For tests and benchmarks (topics created up front), not part of the public API.
 */
static VALUE client_create_topics(VALUE self, VALUE specs, VALUE timeout) {
    client_t *c = client_open(self);
    Check_Type(specs, T_ARRAY);
    long n = RARRAY_LEN(specs);
    for (long i = 0; i < n; i++) { /* check first: nothing native is allocated yet */
        VALUE spec = rb_ary_entry(specs, i);
        Check_Type(spec, T_ARRAY);
        cstr_at(spec, 0);
        NUM2INT(rb_ary_entry(spec, 1));
        VALUE cfg = rb_ary_entry(spec, 2);
        if (!NIL_P(cfg)) {
            Check_Type(cfg, T_ARRAY); /* [[name, value], ...] */
            for (long j = 0; j < RARRAY_LEN(cfg); j++) {
                cstr_at(RARRAY_AREF(cfg, j), 0);
                cstr_at(RARRAY_AREF(cfg, j), 1);
            }
        }
    }
    char errstr[512];
    struct create_topics_args a = {c, ALLOCA_N(rd_kafka_NewTopic_t *, n > 0 ? n : 1), 0, NUM2INT(timeout), NULL};
    VALUE out = rb_ary_new();
    for (long i = 0; i < n; i++) {
        VALUE spec = rb_ary_entry(specs, i), cfg = rb_ary_entry(spec, 2);
        rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(cstr_at(spec, 0), NUM2INT(rb_ary_entry(spec, 1)),
                                                        1, errstr, sizeof(errstr));
        if (!nt) {
            rb_ary_push(out, rb_ary_new_from_args(3, rb_ary_entry(spec, 0), INT2FIX(RD_KAFKA_RESP_ERR__INVALID_ARG),
                                                  rb_str_new_cstr(errstr)));
            continue;
        }
        if (!NIL_P(cfg))
            for (long j = 0; j < RARRAY_LEN(cfg); j++)
                rd_kafka_NewTopic_set_config(nt, cstr_at(RARRAY_AREF(cfg, j), 0), cstr_at(RARRAY_AREF(cfg, j), 1));
        a.topics[a.count++] = nt;
    }
    if (a.count > 0) {
        busy_enter(c);
        rb_thread_call_without_gvl(create_topics_nogvl, &a, RUBY_UBF_IO, NULL);
        busy_leave(c);
    }
    for (size_t i = 0; i < a.count; i++) rd_kafka_NewTopic_destroy(a.topics[i]);
    if (a.count > 0 && !a.result) {
        rb_ary_push(out, rb_ary_new_from_args(3, Qnil, INT2FIX(RD_KAFKA_RESP_ERR__TIMED_OUT), rb_str_new_cstr("timed out")));
        return out;
    }
    if (a.result) {
        const rd_kafka_CreateTopics_result_t *res = rd_kafka_event_CreateTopics_result(a.result);
        size_t cnt = 0;
        const rd_kafka_topic_result_t **results = res ? rd_kafka_CreateTopics_result_topics(res, &cnt) : NULL;
        if (!res)
            rb_ary_push(out, rb_ary_new_from_args(3, Qnil, INT2FIX(rd_kafka_event_error(a.result)),
                                                  str_or_nil(rd_kafka_event_error_string(a.result))));
        for (size_t i = 0; i < cnt; i++)
            rb_ary_push(out, rb_ary_new_from_args(3, rb_str_new_cstr(rd_kafka_topic_result_name(results[i])),
                                                  INT2FIX(rd_kafka_topic_result_error(results[i])),
                                                  str_or_nil(rd_kafka_topic_result_error_string(results[i]))));
        rd_kafka_event_destroy(a.result);
    }
    return out;
}

/* ------------------------------------------------------------------ destroy */

static void *destroy_nogvl(void *p) {
    client_t *c = p;
    /* Calls that released the GVL before #destroy marked us closed finish first
     * (flush slices notice `closed`; a blocking wait was yielded). */
    while (__atomic_load_n(&c->busy, __ATOMIC_SEQ_CST) > 0) usleep(1000);
    release_native(c);
    return NULL;
}

static void destroy_ubf(void *p) {} /* a half-destroyed handle is worse than a late interrupt */

/*
 * #destroy — idempotent. Refuses every later call, waits for GVL-released calls
 * in flight, then destroys the handle without the GVL. In a forked child it only
 * marks the handle closed (the parent owns it).
 */
static VALUE client_destroy(VALUE self) {
    client_t *c = client_get(self);
    if (!c->rk || c->closed) return Qnil;
    __atomic_store_n(&c->closed, 1, __ATOMIC_SEQ_CST);
    if (sluice_forked(c->pid)) {
        close_pipe(c);
        return Qnil;
    }
    rd_kafka_queue_yield(c->queue);
    rb_thread_call_without_gvl(destroy_nogvl, c, destroy_ubf, NULL);
    return Qnil;
}

/* #take_inflight -> handles that never got a delivery report (after #destroy) */
static VALUE client_take_inflight(VALUE self) {
    client_t *c = client_get(self);
    VALUE out = rb_ary_new();
    if (NIL_P(c->inflight)) return out;
    for (long i = 0; i < RARRAY_LEN(c->inflight); i++) {
        VALUE h = slot_release(c, i);
        if (!NIL_P(h)) rb_ary_push(out, h);
    }
    return out;
}

static VALUE client_closed_p(VALUE self) {
    client_t *c = client_get(self);
    return (c->closed || !c->rk || sluice_forked(c->pid)) ? Qtrue : Qfalse;
}

static VALUE client_forked_p(VALUE self) { return sluice_forked(client_get(self)->pid) ? Qtrue : Qfalse; }

void sluice_init_client(void) {
    cClient = rb_define_class_under(sluice_mNative, "Client", rb_cObject);
    rb_define_alloc_func(cClient, client_alloc);
    rb_define_method(cClient, "initialize", client_initialize, 1);
    rb_define_method(cClient, "validate", client_validate, 1);
    rb_define_method(cClient, "handles", client_handles, 2);
    rb_define_method(cClient, "produce", client_produce, -1);
    rb_define_method(cClient, "drain", client_drain, 2);
    rb_define_method(cClient, "exhausted?", client_exhausted_p, 0);
    rb_define_method(cClient, "wait_events", client_wait_events, 1);
    rb_define_method(cClient, "interrupt_wait", client_interrupt_wait, 0);
    rb_define_method(cClient, "queue_length", client_queue_length, 0);
    rb_define_method(cClient, "outq_len", client_outq_len, 0);
    rb_define_method(cClient, "inflight_count", client_inflight_count, 0);
    rb_define_method(cClient, "wakeup_enable", client_wakeup_enable, 0);
    rb_define_method(cClient, "wakeup_disable", client_wakeup_disable, 0);
    rb_define_method(cClient, "wakeup_signal", client_wakeup_signal, 0);
    rb_define_method(cClient, "wakeup_fd", client_wakeup_fd, 0);
    rb_define_method(cClient, "flush", client_flush, 1);
    rb_define_method(cClient, "purge", client_purge, 0);
    rb_define_method(cClient, "init_transactions", client_init_transactions, 1);
    rb_define_method(cClient, "begin_transaction", client_begin_transaction, 0);
    rb_define_method(cClient, "commit_transaction", client_commit_transaction, 1);
    rb_define_method(cClient, "abort_transaction", client_abort_transaction, 1);
    rb_define_method(cClient, "partition_count", client_partition_count, 2);
    rb_define_method(cClient, "partition_for", client_partition_for, 2);
    rb_define_method(cClient, "oauthbearer_set_token", client_oauthbearer_set_token, 4);
    rb_define_method(cClient, "oauthbearer_set_token_failure", client_oauthbearer_set_token_failure, 1);
    rb_define_method(cClient, "fatal_error", client_fatal_error, 0);
    rb_define_method(cClient, "name", client_name, 0);
    rb_define_method(cClient, "create_topics", client_create_topics, 2);
    rb_define_method(cClient, "destroy", client_destroy, 0);
    rb_define_method(cClient, "take_inflight", client_take_inflight, 0);
    rb_define_method(cClient, "closed?", client_closed_p, 0);
    rb_define_method(cClient, "forked?", client_forked_p, 0);

    id_topic = rb_intern("topic");
    id_payload = rb_intern("payload");
    id_key = rb_intern("key");
    id_partition = rb_intern("partition");
    id_partition_key = rb_intern("partition_key");
    id_timestamp = rb_intern("timestamp");
    id_headers = rb_intern("headers");
    id_label = rb_intern("label");
    sym_error = ID2SYM(rb_intern("error"));
    sym_statistics = ID2SYM(rb_intern("statistics"));
    sym_oauthbearer_token_refresh = ID2SYM(rb_intern("oauthbearer_token_refresh"));
    sym_log = ID2SYM(rb_intern("log"));
    id_iv_topic = rb_intern("@topic");
    id_iv_label = rb_intern("@label");
    id_iv_notifier = rb_intern("@notifier");
    id_iv_partition = rb_intern("@partition");
    id_iv_offset = rb_intern("@offset");
}
