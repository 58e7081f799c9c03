/*
 * Sluice::Native::Producer — producing: message validation, topic handles,
 * the in-flight table that maps message opaques to Ruby delivery handles, and
 * the waits on what was produced (flush, purge).
 */
#include "produce.h"

#include "client.h"
#include "delivery_handle.h"
#include "gate.h"
#include "init.h"
#include "values.h"

#include <math.h>
#include <stdarg.h>
#include <string.h> /* memmem: Ruby's config header defines _GNU_SOURCE */

static ID id_topic, id_payload, id_key, id_partition, id_partition_key, id_timestamp, id_headers, id_label;


static long slot_acquire(client_t *c, VALUE handle) {
    producer_t *p = sluice_producer_of(c);
    long slot;
    if (p->free_count > 0) {
        slot = p->free_slots[--p->free_count];
        rb_ary_store(p->inflight, slot, handle);
    } else {
        slot = RARRAY_LEN(p->inflight);
        if (slot >= INT32_MAX) rb_raise(rb_eRangeError, "too many messages in flight");
        if (slot >= p->free_capa) { /* grow first, so releasing a slot never allocates */
            long capa = p->free_capa ? p->free_capa * 2 : 1024;
            REALLOC_N(p->free_slots, int32_t, capa);
            p->free_capa = capa;
        }
        rb_ary_push(p->inflight, handle);
    }
    p->inflight_count++;
    return slot;
}

/* The DeliveryHandle in slot, and the slot freed. */
static VALUE inflight_release(client_t *c, long slot) {
    producer_t *p = sluice_producer_of(c);
    if (slot < 0 || slot >= RARRAY_LEN(p->inflight)) return Qnil;
    VALUE handle = RARRAY_AREF(p->inflight, slot);
    if (NIL_P(handle)) return Qnil;
    RARRAY_ASET(p->inflight, slot, Qnil);
    p->free_slots[p->free_count++] = (int32_t)slot;
    p->inflight_count--;
    return handle;
}

/* What topic_handle found. */
enum topic_lookup { TOPIC_FOUND, TOPIC_BY_NAME, TOPIC_BOUND_ELSEWHERE, TOPIC_REFUSED };

/*
 * The cached topic handle for name with the settings conf_id, in *rkt.
 * librdkafka keeps one topic object (and one topic configuration) per name
 * per client: rd_kafka_topic_new with another configuration hands back the
 * existing object and drops the new settings. Each configuration carries its
 * id as the topic opaque, so a topic bound to other settings is noticed
 * (TOPIC_BOUND_ELSEWHERE) instead of producing with the wrong ones.
 * TOPIC_BY_NAME: no handle for the producer's own settings (out of memory, or
 * librdkafka refused one): produce by name, which reports librdkafka's error.
 * TOPIC_REFUSED: no handle for a variant's settings; rd_kafka_last_error() says why.
 * The cache has one entry per topic used, looked up linearly (name length
 * first): producers use a handful of topics.
 */
static enum topic_lookup topic_handle(client_t *c, const char *name, size_t len, int conf_id, rd_kafka_topic_t **rkt) {
    producer_t *p = sluice_producer_of(c);
    *rkt = NULL;
    for (int i = 0; i < p->topic_count; i++)
        if (p->topics[i].len == len && !memcmp(p->topics[i].name, name, len)) {
            if (p->topics[i].conf_id != conf_id) return TOPIC_BOUND_ELSEWHERE;
            *rkt = p->topics[i].rkt;
            return TOPIC_FOUND;
        }
    if (p->topic_count == p->topic_capa) {
        int capa = p->topic_capa ? p->topic_capa * 2 : 16;
        topic_entry_t *grown = realloc(p->topics, sizeof(*grown) * (size_t)capa);
        if (!grown) return conf_id ? TOPIC_REFUSED : TOPIC_BY_NAME;
        p->topics = grown;
        p->topic_capa = capa;
    }
    char *copy = malloc(len + 1);
    if (!copy) return conf_id ? TOPIC_REFUSED : TOPIC_BY_NAME;
    memcpy(copy, name, len);
    copy[len] = '\0';
    rd_kafka_topic_conf_t *conf = conf_id ? rd_kafka_topic_conf_dup(p->topic_confs[conf_id - 1]) : NULL;
    rd_kafka_topic_t *found = rd_kafka_topic_new(c->rk, copy, conf); /* takes conf over */
    if (!found) {
        free(copy);
        return conf_id ? TOPIC_REFUSED : TOPIC_BY_NAME;
    }
    if (rd_kafka_topic_opaque(found) != (void *)(intptr_t)conf_id) { /* created earlier with other settings */
        rd_kafka_topic_destroy(found);
        free(copy);
        return TOPIC_BOUND_ELSEWHERE;
    }
    p->topics[p->topic_count++] = (topic_entry_t){copy, len, conf_id, found};
    *rkt = found;
    return TOPIC_FOUND;
}

/* Raises ConfigurationInvalidError unless the topic can be produced to with settings conf_id. */
static rd_kafka_topic_t *topic_for(client_t *c, VALUE topic, int conf_id) {
    rd_kafka_topic_t *rkt;
    switch (topic_handle(c, RSTRING_PTR(topic), (size_t)RSTRING_LEN(topic), conf_id, &rkt)) {
    case TOPIC_BOUND_ELSEWHERE:
        rb_raise(sluice_eConfigurationInvalid,
                 "topic %" PRIsVALUE " is already bound to other topic settings in this producer: librdkafka keeps "
                 "one topic configuration per topic per client, fixed by the first producer or variant that uses it",
                 topic);
    case TOPIC_REFUSED:
        rb_raise(sluice_eConfigurationInvalid, "librdkafka refused a topic handle for %" PRIsVALUE " with this variant's topic settings: %s",
                 topic, rd_kafka_err2str(rd_kafka_last_error()));
    default:
        return rkt;
    }
}

/* A topic setting of conf as librdkafka holds it (normalised: "all" reads "-1"). */
static long long topic_conf_number(rd_kafka_topic_conf_t *conf, const char *name) {
    char value[64];
    size_t size = sizeof(value);
    if (rd_kafka_topic_conf_get(conf, name, value, &size) != RD_KAFKA_CONF_OK) return 0;
    return strtoll(value, NULL, 10);
}

static long long client_conf_number(client_t *c, const char *name) {
    char value[64];
    size_t size = sizeof(value);
    if (rd_kafka_conf_get(rd_kafka_conf(c->rk), name, value, &size) != RD_KAFKA_CONF_OK) return 0;
    if (!strcmp(value, "true")) return 1;
    return strtoll(value, NULL, 10);
}

static int pairs_set(VALUE pairs, const char *a, const char *b) {
    for (long i = 0; i < RARRAY_LEN(pairs); i++) {
        const char *name = sluice_cstr_at(rb_ary_entry(pairs, i), 0);
        if (!strcmp(name, a) || (b && !strcmp(name, b))) return 1;
    }
    return 0;
}

/*
 * What librdkafka's rd_kafka_topic_new refuses later (its topic settings
 * checked against the client's, rd_kafka_topic_conf_finalize) without saying
 * why to the caller: checked when the variant is built, with its words. Only
 * the settings the variant sets are checked; librdkafka adjusts the others.
 */
static const char *topic_conf_conflict(client_t *c, rd_kafka_topic_conf_t *conf, VALUE pairs) {
    int transactional = 0;
    char id[8];
    size_t size = sizeof(id);
    if (rd_kafka_conf_get(rd_kafka_conf(c->rk), "transactional.id", id, &size) == RD_KAFKA_CONF_OK && size > 1)
        transactional = 1; /* size counts the NUL: 1 is "" (unset) */
    if (client_conf_number(c, "enable.idempotence") || transactional) {
        if (pairs_set(pairs, "acks", "request.required.acks") && topic_conf_number(conf, "request.required.acks") != -1)
            return "`acks` must be set to `all` when `enable.idempotence` is true";
        char strategy[16];
        size = sizeof(strategy);
        if (pairs_set(pairs, "queuing.strategy", NULL) &&
            rd_kafka_topic_conf_get(conf, "queuing.strategy", strategy, &size) == RD_KAFKA_CONF_OK && strcmp(strategy, "fifo"))
            return "`queuing.strategy` must be set to `fifo` when `enable.idempotence` is true";
    }
    int timeout_set = pairs_set(pairs, "message.timeout.ms", "delivery.timeout.ms");
    long long timeout = topic_conf_number(conf, "message.timeout.ms");
    if (transactional && timeout_set && timeout > client_conf_number(c, "transaction.timeout.ms"))
        return "`message.timeout.ms` must be set <= `transaction.timeout.ms`";
    if (timeout_set && timeout != 0 && timeout <= client_conf_number(c, "linger.ms"))
        return "`message.timeout.ms` must be greater than `linger.ms`";
    return NULL;
}

/*
 * #add_topic_config([[name, value], ...]) -> Integer id for #produce
 * The producer's own topic settings with these on top. Raises
 * ConfigurationInvalidError with librdkafka's message for a setting that is
 * unknown or not topic-level, or a value it refuses.
 */
/* Checks the pairs' shape and converts each once: nothing after may raise while a conf is alive. */
static void topic_pairs_check(VALUE pairs) {
    Check_Type(pairs, T_ARRAY);
    long n = RARRAY_LEN(pairs);
    for (long i = 0; i < n; i++) {
        VALUE pair = rb_ary_entry(pairs, i);
        Check_Type(pair, T_ARRAY);
        if (RARRAY_LEN(pair) != 2) rb_raise(rb_eArgError, "config pairs must be [name, value]");
        sluice_cstr_at(pair, 0);
        sluice_cstr_at(pair, 1);
    }
}

/* Sets the pairs on conf; on a refusal destroys conf and returns librdkafka's words in errstr (non-zero). */
static int topic_pairs_set(rd_kafka_topic_conf_t *conf, VALUE pairs, char *errstr, size_t size) {
    for (long i = 0; i < RARRAY_LEN(pairs); i++) {
        VALUE pair = rb_ary_entry(pairs, i);
        if (rd_kafka_topic_conf_set(conf, sluice_cstr_at(pair, 0), sluice_cstr_at(pair, 1), errstr, size) != RD_KAFKA_CONF_OK) {
            rd_kafka_topic_conf_destroy(conf);
            return 1;
        }
    }
    return 0;
}

/*
 * Native.check_topic_config(pairs) -> nil
 *
 * What #add_topic_config refuses of the settings themselves (unknown, not
 * topic-level, a value librdkafka does not take), without a handle: the
 * test doubles' check. Raises ConfigurationInvalidError with librdkafka's words.
 */
static VALUE native_check_topic_config(VALUE self, VALUE pairs) {
    (void)self;
    char errstr[512];
    topic_pairs_check(pairs);
    rd_kafka_topic_conf_t *conf = rd_kafka_topic_conf_new();
    if (topic_pairs_set(conf, pairs, errstr, sizeof(errstr))) rb_raise(sluice_eConfigurationInvalid, "topic_config: %s", errstr);
    rd_kafka_topic_conf_destroy(conf);
    return Qnil;
}

static VALUE client_add_topic_config(VALUE self, VALUE pairs) {
    client_t *c = sluice_client_open(self);
    producer_t *p = sluice_producer_of(c);
    char errstr[512];
    topic_pairs_check(pairs);
    if (p->topic_conf_count == p->topic_conf_capa) {
        int capa = p->topic_conf_capa ? p->topic_conf_capa * 2 : 4;
        rd_kafka_topic_conf_t **grown = realloc(p->topic_confs, sizeof(*grown) * (size_t)capa);
        if (!grown) rb_memerror();
        p->topic_confs = grown;
        p->topic_conf_capa = capa;
    }
    rd_kafka_topic_conf_t *conf = rd_kafka_default_topic_conf_dup(c->rk);
    if (topic_pairs_set(conf, pairs, errstr, sizeof(errstr))) rb_raise(sluice_eConfigurationInvalid, "topic_config: %s", errstr);
    const char *conflict = topic_conf_conflict(c, conf, pairs);
    if (conflict) {
        rd_kafka_topic_conf_destroy(conf);
        rb_raise(sluice_eConfigurationInvalid, "topic_config: %s", conflict);
    }
    int id = p->topic_conf_count + 1;
    rd_kafka_topic_conf_set_opaque(conf, (void *)(intptr_t)id);
    p->topic_confs[p->topic_conf_count++] = conf;
    return INT2FIX(id);
}

static void topic_confs_release(client_t *c) {
    producer_t *p = sluice_producer_of(c);
    for (int i = 0; i < p->topic_conf_count; i++) rd_kafka_topic_conf_destroy(p->topic_confs[i]);
    free(p->topic_confs);
    p->topic_confs = NULL;
    p->topic_conf_count = p->topic_conf_capa = 0;
}

static int conf_id_arg(client_t *c, VALUE conf_id) {
    producer_t *p = sluice_producer_of(c);
    int id = NIL_P(conf_id) ? 0 : NUM2INT(conf_id);
    if (id < 0 || id > p->topic_conf_count) rb_raise(rb_eArgError, "unknown topic config id %d", id);
    return id;
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
    if (!RB_TYPE_P(topic, T_STRING)) invalid("topic must be a String or Symbol, got %" PRIsVALUE, rb_obj_class(topic));
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
    if (id == id_topic) f->m->topic = SYMBOL_P(value) ? rb_sym2str(value) : value; /* WaterDrop accepts topic: :name */
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
    client_t *c = sluice_client_get(self);
    producer_t *p = sluice_producer_of(c);
    Check_Type(klass, T_CLASS);
    RB_OBJ_WRITE(self, &p->handle_class, klass);
    RB_OBJ_WRITE(self, &p->notifier, notifier);
    return Qnil;
}

/*
 * Builds the handle of a read message and enqueues it. Returns the handle, or
 * librdkafka's error code (Integer) when enqueuing failed (nothing is left
 * behind then). Raises only before anything native is allocated.
 */
static VALUE produce_one(client_t *c, message_t *m, int conf_id) {
    producer_t *p = sluice_producer_of(c);
    rd_kafka_topic_t *rkt = topic_for(c, m->topic, conf_id);
    const char *topic = StringValueCStr(m->topic);
    VALUE handle = sluice_handle_new(p->handle_class, m->topic, m->label, p->notifier);
    long slot = slot_acquire(c, handle);
    /* Nothing below raises: the slot is released on every failure path. */
    rd_kafka_vu_t vu[8];
    size_t n = 0;
    if (rkt) vu[n].vtype = RD_KAFKA_VTYPE_RKT, vu[n++].u.rkt = rkt;
    else vu[n].vtype = RD_KAFKA_VTYPE_TOPIC, vu[n++].u.cstr = topic;
    vu[n].vtype = RD_KAFKA_VTYPE_MSGFLAGS, vu[n++].u.i = RD_KAFKA_MSG_F_COPY;
    vu[n].vtype = RD_KAFKA_VTYPE_OPAQUE, vu[n++].u.ptr = (void *)(uintptr_t)(slot + 1);
    if (m->partition != RD_KAFKA_PARTITION_UA) vu[n].vtype = RD_KAFKA_VTYPE_PARTITION, vu[n++].u.i32 = m->partition;
    if (!NIL_P(m->payload)) {
        vu[n].vtype = RD_KAFKA_VTYPE_VALUE;
        vu[n].u.mem.ptr = RSTRING_PTR(m->payload);
        vu[n++].u.mem.size = (size_t)RSTRING_LEN(m->payload);
    }
    if (!NIL_P(m->key)) {
        vu[n].vtype = RD_KAFKA_VTYPE_KEY;
        vu[n].u.mem.ptr = RSTRING_PTR(m->key);
        vu[n++].u.mem.size = (size_t)RSTRING_LEN(m->key);
    }
    if (m->timestamp >= 0) vu[n].vtype = RD_KAFKA_VTYPE_TIMESTAMP, vu[n++].u.i64 = m->timestamp;
    rd_kafka_headers_t *hdrs = NULL;
    if (m->header_count > 0) {
        hdrs = rd_kafka_headers_new((size_t)m->header_count);
        rb_hash_foreach(m->headers, add_header, (VALUE)hdrs);
        vu[n].vtype = RD_KAFKA_VTYPE_HEADERS, vu[n++].u.headers = hdrs;
    }
    rd_kafka_error_t *error = rd_kafka_produceva(c->rk, vu, n);
    if (!error) return handle;
    rd_kafka_resp_err_t code = rd_kafka_error_code(error);
    rd_kafka_error_destroy(error);
    if (hdrs) rd_kafka_headers_destroy(hdrs); /* only taken over on success */
    inflight_release(c, slot);
    return INT2FIX(code);
}

static void check_handles(client_t *c) {
    producer_t *p = sluice_producer_of(c);
    if (NIL_P(p->handle_class)) rb_raise(rb_eRuntimeError, "Client#handles was not called");
}

/*
 * #produce(message, partition = nil, topic_config_id = nil) -> DeliveryHandle, error code, or false
 *
 * Validates the message, builds its handle (@topic, @label, @notifier) and
 * enqueues it, on the topic handle of the given topic settings (0 or nil: the
 * producer's own). Returns the librdkafka error code (Integer) when enqueuing
 * failed, and false — before enqueuing anything — when the message has a
 * partition_key and no partition: Ruby resolves the key, then calls again
 * with the partition. Keeps the GVL: rd_kafka_produceva only enqueues (it
 * never blocks without RD_KAFKA_MSG_F_BLOCK), and releasing the GVL would cost
 * more than the call.
 */
static VALUE client_produce(int argc, VALUE *argv, VALUE self) {
    VALUE message, partition, conf_id;
    rb_scan_args(argc, argv, "12", &message, &partition, &conf_id);
    client_t *c = sluice_client_open(self);
    message_t m;
    message_read(message, &m);
    if (NIL_P(partition) && m.partition == RD_KAFKA_PARTITION_UA && !NIL_P(m.partition_key)) return Qfalse;
    if (!NIL_P(partition)) m.partition = NUM2INT(partition);
    check_handles(c);
    return produce_one(c, &m, conf_id_arg(c, conf_id));
}

/*
 * #produce_many(messages, partitions = nil, topic_config_id = nil) -> [handles, error code or nil], or false
 *
 * The batch in one call: every message is validated first (MessageInvalidError,
 * nothing enqueued), then each is enqueued in order. Stops at the first one
 * librdkafka refuses: the handles of those enqueued before it come back with
 * its error code, and the caller decides about the rest (a full queue: wait
 * and go on from there). false, before anything is enqueued: a message has a
 * partition_key and no partition, and no `partitions` (an Array with a
 * partition or nil per message) were given.
 */
static VALUE client_produce_many(int argc, VALUE *argv, VALUE self) {
    VALUE messages, partitions, conf_id;
    rb_scan_args(argc, argv, "12", &messages, &partitions, &conf_id);
    client_t *c = sluice_client_open(self);
    Check_Type(messages, T_ARRAY);
    if (!NIL_P(partitions)) {
        Check_Type(partitions, T_ARRAY);
        if (RARRAY_LEN(partitions) != RARRAY_LEN(messages)) rb_raise(rb_eArgError, "one partition (or nil) per message");
    }
    check_handles(c);
    int id = conf_id_arg(c, conf_id);
    message_t m;
    long n = RARRAY_LEN(messages);
    for (long i = 0; i < n; i++) {
        message_read(RARRAY_AREF(messages, i), &m);
        if (NIL_P(partitions) && m.partition == RD_KAFKA_PARTITION_UA && !NIL_P(m.partition_key)) return Qfalse;
        topic_for(c, m.topic, id); /* a topic bound to other settings refuses the whole batch */
    }
    VALUE handles = rb_ary_new_capa(n);
    for (long i = 0; i < RARRAY_LEN(messages) && i < n; i++) {
        message_read(RARRAY_AREF(messages, i), &m); /* read again: a message_t holds unmarked references */
        VALUE partition = NIL_P(partitions) ? Qnil : RARRAY_AREF(partitions, i);
        if (!NIL_P(partition)) m.partition = NUM2INT(partition);
        VALUE result = produce_one(c, &m, id);
        if (FIXNUM_P(result)) return rb_assoc_new(handles, result);
        rb_ary_push(handles, result);
    }
    return rb_assoc_new(handles, Qnil);
}

/* ------------------------------------------------------------------ counted lines */

/*
 * #produce_lines' messages carry their input line number as the opaque, with
 * this bit set: no slot in the in-flight table and no DeliveryHandle each
 * (sluice produce's million lines are a million Ruby objects fewer). Their
 * reports are counted (a delivery) or kept as line and code (anything else).
 */
#define LINE_TAG ((uintptr_t)1 << (sizeof(uintptr_t) * 8 - 1))

/* A #produce_lines message's report (GVL held: drain.c). */
static void line_reported(client_t *c, uintptr_t line, rd_kafka_resp_err_t err) {
    producer_t *p = sluice_producer_of(c);
    if (!err) {
        p->lines_delivered++;
        c->progress++;
        return;
    }
    if (p->missed_count == p->missed_capa) {
        long capa = p->missed_capa ? p->missed_capa * 2 : 64;
        int64_t *grown = realloc(p->missed, sizeof(*grown) * 2 * (size_t)capa);
        if (!grown) return; /* no memory: the message stays sent and never reported (Ruby counts it unknown) */
        p->missed = grown;
        p->missed_capa = capa;
    }
    p->missed[2 * p->missed_count] = (int64_t)line;
    p->missed[2 * p->missed_count + 1] = err;
    p->missed_count++;
}

/* One record as a message; NULL, or librdkafka's refusal (the caller destroys it). */
static rd_kafka_error_t *produce_record(client_t *c, rd_kafka_topic_t *rkt, const char *topic, int32_t partition,
                                        const char *record, long len, int64_t line) {
    rd_kafka_vu_t vu[5];
    size_t n = 0;
    if (rkt) vu[n].vtype = RD_KAFKA_VTYPE_RKT, vu[n++].u.rkt = rkt;
    else vu[n].vtype = RD_KAFKA_VTYPE_TOPIC, vu[n++].u.cstr = topic;
    vu[n].vtype = RD_KAFKA_VTYPE_MSGFLAGS, vu[n++].u.i = RD_KAFKA_MSG_F_COPY;
    vu[n].vtype = RD_KAFKA_VTYPE_OPAQUE, vu[n++].u.ptr = (void *)(LINE_TAG | (uintptr_t)line);
    if (partition != RD_KAFKA_PARTITION_UA) vu[n].vtype = RD_KAFKA_VTYPE_PARTITION, vu[n++].u.i32 = partition;
    vu[n].vtype = RD_KAFKA_VTYPE_VALUE;
    vu[n].u.mem.ptr = (void *)record;
    vu[n++].u.mem.size = (size_t)len;
    return rd_kafka_produceva(c->rk, vu, n);
}

/*
 * #produce_lines(topic, data, offset, delimiter, partition, line, max, empties, conf_id)
 *   -> [offset, line, sent, error code or nil]
 *
 * data's records from offset (each ended by delimiter; the last may lack it),
 * each a message whose value is the record (its delimiter taken off), to
 * topic and partition (-1: the partitioner's), at most max of them, record
 * after record numbered from line. An empty record is no message: its line
 * number is pushed to empties. Returns the offset and line number of the
 * record it stopped at, the messages enqueued, and librdkafka's code when it
 * refused that record. The record walk only: what to send, how to wait for a
 * full queue and what a refusal means are Ruby's (producer/enqueuer.rb,
 * cli/commands/produce.rb). Reports go to #line_reports.
 */
static VALUE client_produce_lines(int argc, VALUE *argv, VALUE self) {
    VALUE topic, data, offset, delimiter, partition, first, max, empties, conf_id;
    rb_scan_args(argc, argv, "9", &topic, &data, &offset, &delimiter, &partition, &first, &max, &empties, &conf_id);
    client_t *c = sluice_client_open(self);
    StringValue(data);
    StringValue(delimiter);
    Check_Type(empties, T_ARRAY);
    check_topic(topic);
    long len = RSTRING_LEN(data), dlen = RSTRING_LEN(delimiter), pos = NUM2LONG(offset), limit = NUM2LONG(max);
    int32_t part = NUM2INT(partition);
    int64_t line = NUM2LL(first);
    if (dlen < 1 || pos < 0 || pos > len || line < 1) rb_raise(rb_eArgError, "a delimiter, an offset within data and a line from 1");
    rd_kafka_topic_t *rkt = topic_for(c, topic, conf_id_arg(c, conf_id));
    const char *name = StringValueCStr(topic);
    const char *base = RSTRING_PTR(data), *delim = RSTRING_PTR(delimiter);
    long sent = 0;
    VALUE code = Qnil;
    while (pos < len && sent < limit) {
        const char *end = memmem(base + pos, (size_t)(len - pos), delim, (size_t)dlen);
        long size = end ? (long)(end - (base + pos)) : len - pos;
        if (size == 0) {
            rb_ary_push(empties, LL2NUM(line));
        } else {
            rd_kafka_error_t *error = produce_record(c, rkt, name, part, base + pos, size, line);
            if (error) {
                code = INT2FIX(rd_kafka_error_code(error));
                rd_kafka_error_destroy(error);
                break;
            }
            sent++;
        }
        pos += end ? size + dlen : size;
        line++;
    }
    VALUE out[4] = {LONG2NUM(pos), LL2NUM(line), LONG2NUM(sent), code};
    return rb_ary_new_from_values(4, out);
}

/*
 * #line_reports -> [delivered, [line, code, line, code, ...]]
 * #produce_lines' messages delivered so far, and the reports that were no
 * delivery since the last call (each taken once).
 */
static VALUE client_line_reports(VALUE self) {
    producer_t *p = sluice_producer_of(sluice_client_get(self));
    VALUE missed = rb_ary_new_capa(2 * p->missed_count);
    for (long i = 0; i < 2 * p->missed_count; i++) rb_ary_push(missed, LL2NUM(p->missed[i]));
    p->missed_count = 0;
    return rb_assoc_new(LONG2NUM(p->lines_delivered), missed);
}

/* #outq_len -> messages not yet delivered plus events not yet served */
static VALUE client_outq_len(VALUE self) { return INT2NUM(rd_kafka_outq_len(sluice_client_open(self)->rk)); }

static VALUE client_inflight_count(VALUE self) { return LONG2NUM(sluice_producer_of(sluice_client_get(self))->inflight_count); }

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
    client_t *c = sluice_client_open(self);
    struct flush_args a = {c, NUM2INT(timeout), 0, RD_KAFKA_RESP_ERR__TIMED_OUT};
    sluice_gate_enter(c, flush_nogvl, &a, flush_ubf, &a, NULL);
    sluice_gate_leave(c);
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
    client_t *c = sluice_client_open(self);
    struct purge_args a = {c, 0};
    /* waits briefly for the broker threads to drop their queues; nothing to cut short */
    sluice_gate_enter(c, purge_nogvl, &a, NULL, NULL, NULL);
    sluice_gate_leave(c);
    return INT2FIX(a.err);
}

/*
 * #partition_for(partition_key, partition_count) -> Integer
 * The configured partitioner applied to a key that is not the message key.
 * librdkafka's key-hashing partitioners don't touch the topic for a non-empty
 * key; an empty key or the "random" partitioner leaves the choice to librdkafka.
 */
static VALUE client_partition_for(VALUE self, VALUE key, VALUE count) {
    client_t *c = sluice_client_get(self);
    producer_t *p = sluice_producer_of(c);
    StringValue(key);
    int32_t cnt = NUM2INT(count);
    if (!p->partitioner || RSTRING_LEN(key) == 0 || cnt <= 0) return INT2FIX(RD_KAFKA_PARTITION_UA);
    return INT2FIX(p->partitioner(NULL, RSTRING_PTR(key), (size_t)RSTRING_LEN(key), cnt, NULL, NULL));
}

static void topics_release(client_t *c) {
    producer_t *p = sluice_producer_of(c);
    for (int i = 0; i < p->topic_count; i++) {
        rd_kafka_topic_destroy(p->topics[i].rkt);
        free(p->topics[i].name);
    }
    free(p->topics);
    p->topics = NULL;
    p->topic_count = p->topic_capa = 0;
}

/* #take_inflight -> handles that never got a delivery report (after #destroy) */
static VALUE client_take_inflight(VALUE self) {
    client_t *c = sluice_client_get(self);
    producer_t *p = sluice_producer_of(c);
    VALUE out = rb_ary_new();
    if (NIL_P(p->inflight)) return out;
    for (long i = 0; i < RARRAY_LEN(p->inflight); i++) {
        VALUE h = inflight_release(c, i);
        if (!NIL_P(h)) rb_ary_push(out, h);
    }
    return out;
}

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

static void note_partitioner(client_t *c, const char *name, const char *value) {
    producer_t *p = sluice_producer_of(c);
    if (!strcmp(name, "partitioner")) p->partitioner = partitioner_named(value);
}

/*
 * Producer.new([[name, value], ...]) — librdkafka properties as Strings.
 * Raises ConfigurationInvalidError with librdkafka's own message. A consumer
 * property is only logged as ignored (shared configurations are common).
 */
static VALUE producer_initialize(VALUE self, VALUE pairs) {
    client_t *c = sluice_client_get(self);
    producer_t *p = sluice_producer_of(c);
    p->partitioner = rd_kafka_msg_partitioner_consistent_random;
    rd_kafka_conf_t *conf = sluice_conf_new(pairs, note_partitioner, c);
    sluice_client_start(self, c, RD_KAFKA_PRODUCER, conf,
                        RD_KAFKA_EVENT_DR | RD_KAFKA_EVENT_ERROR | RD_KAFKA_EVENT_STATS | RD_KAFKA_EVENT_OAUTHBEARER_TOKEN_REFRESH, 0);
    RB_OBJ_WRITE(self, &p->inflight, rb_ary_new());
    return self;
}

/* ---- the producer's steps of the base's release (client_kind_t, client.h) ---- */

static void producer_release_start(client_t *c) {
    topics_release(c);
    topic_confs_release(c);
}

/* A forked child: plain memory only (no librdkafka thread touches a topic conf; the topic handles are the parent's). */
static void producer_free_forked(client_t *c) {
    producer_t *p = sluice_producer_of(c);
    for (int i = 0; i < p->topic_count; i++) free(p->topics[i].name);
    free(p->topics);
    topic_confs_release(c);
}

/*
 * client_kind_t.delivery (drain.c): a delivery report's handle, out of the
 * in-flight table; a success counted and recorded on it (delivery_handle.c).
 */
static VALUE producer_delivery(client_t *c, const rd_kafka_message_t *msg) {
    uintptr_t opaque = (uintptr_t)msg->_private;
    if (opaque & LINE_TAG) { /* #produce_lines': counted, no handle */
        line_reported(c, opaque & ~LINE_TAG, msg->err);
        return Qnil;
    }
    VALUE handle = inflight_release(c, (long)(uintptr_t)msg->_private - 1);
    if (NIL_P(handle) || msg->err) return handle;
    c->progress++;
    return sluice_handle_delivered(handle, msg->partition, msg->offset) ? handle : Qnil;
}

/* ---- the producer's struct, for the base (client_kind_t, client.h) ---- */

static void producer_init(client_t *c) {
    producer_t *p = sluice_producer_of(c);
    p->inflight = p->handle_class = p->notifier = Qnil;
}

static void producer_mark(client_t *c) {
    producer_t *p = sluice_producer_of(c);
    rb_gc_mark_movable(p->inflight);
    rb_gc_mark_movable(p->handle_class);
    rb_gc_mark_movable(p->notifier);
}

static void producer_compact(client_t *c) {
    producer_t *p = sluice_producer_of(c);
    p->inflight = rb_gc_location(p->inflight);
    p->handle_class = rb_gc_location(p->handle_class);
    p->notifier = rb_gc_location(p->notifier);
}

static size_t producer_memsize(const client_t *c) { return (size_t)((const producer_t *)c)->free_capa * sizeof(int32_t); }

/* The free-slot stack is the object's (xmalloc'd, never handed to a teardown). */
static void producer_free_memory(client_t *c) {
    xfree(sluice_producer_of(c)->free_slots);
    free(sluice_producer_of(c)->missed); /* malloc'd: grown while drain.c serves reports */
}

/* The topic handles and configurations went to the teardown's copy, which frees them. */
static void producer_disown(client_t *c) {
    producer_t *p = sluice_producer_of(c);
    p->topics = NULL;
    p->topic_count = p->topic_capa = 0;
    p->topic_confs = NULL;
    p->topic_conf_count = p->topic_conf_capa = 0;
}

static const client_kind_t producer_kind = {
    .name = "producer",
    .size = sizeof(producer_t),
    .init = producer_init,
    .mark = producer_mark,
    .compact = producer_compact,
    .memsize = producer_memsize,
    .free_memory = producer_free_memory,
    .disown = producer_disown,
    .closed_error = &sluice_eProducerClosed,
    .release_start = producer_release_start,
    .free_unstarted = topic_confs_release,
    .free_forked = producer_free_forked,
    .delivery = producer_delivery,
};

VALUE sluice_init_produce(VALUE client) {
    VALUE klass = rb_define_class_under(sluice_mNative, "Producer", client);
    rb_define_method(klass, "initialize", producer_initialize, 1);
    rb_define_method(klass, "validate", client_validate, 1);
    rb_define_method(klass, "handles", client_handles, 2);
    rb_define_method(klass, "produce", client_produce, -1);
    rb_define_method(klass, "produce_many", client_produce_many, -1);
    rb_define_method(klass, "produce_lines", client_produce_lines, -1);
    rb_define_method(klass, "line_reports", client_line_reports, 0);
    rb_define_method(klass, "add_topic_config", client_add_topic_config, 1);
    rb_define_module_function(sluice_mNative, "check_topic_config", native_check_topic_config, 1);
    rb_define_method(klass, "outq_len", client_outq_len, 0);
    rb_define_method(klass, "inflight_count", client_inflight_count, 0);
    rb_define_method(klass, "take_inflight", client_take_inflight, 0);
    rb_define_method(klass, "flush", client_flush, 1);
    rb_define_method(klass, "purge", client_purge, 0);
    rb_define_method(klass, "partition_for", client_partition_for, 2);

    id_topic = rb_intern("topic");
    id_payload = rb_intern("payload");
    id_key = rb_intern("key");
    id_partition = rb_intern("partition");
    id_partition_key = rb_intern("partition_key");
    id_timestamp = rb_intern("timestamp");
    id_headers = rb_intern("headers");
    id_label = rb_intern("label");
    sluice_client_kind(klass, &producer_kind);
    return klass;
}
