/*
 * Sluice::Native::Client — the lifecycle of one librdkafka handle.
 *
 * Ownership: the struct owns rd_kafka_t, its main queue reference, an event a
 * blocking wait took off the queue, the wake-up pipe handed to librdkafka, the
 * topic handles and the in-flight table mapping message opaques to Ruby
 * delivery handles. Each is released exactly once, by #destroy or — when the
 * Ruby object is collected without it — by a detached native thread
 * (rd_kafka_destroy can take seconds and must never run inside GC with the GVL
 * held).
 *
 * No librdkafka -> Ruby callback exists: the handle is created with the event
 * API (rd_kafka_conf_set_events) and #drain turns each event into plain data in
 * our own frame. User code runs later, in Ruby, where exceptions are caught.
 *
 * This file knows no client kind: what a kind owns besides the handle (a
 * producer's topic handles, a consumer's queue and relay) it releases through
 * the kind's table (client_kind_t in client.h; the tables are in produce.c,
 * consumer.c and admin.c), at the points release_native marks.
 */
#include "client.h"

#include "init.h"
#include "resolve.h"
#include "values.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The base holds no VALUE: the kind's struct may (a producer's in-flight table). */
static void client_mark(void *p) {
    client_t *c = p;
    if (c->ops && c->ops->mark) c->ops->mark(c);
}

static void client_compact(void *p) {
    client_t *c = p;
    if (c->ops && c->ops->compact) c->ops->compact(c);
}

/* The size of the kind's struct, which begins with client_t (client_kind_t.size). */
static size_t struct_size(const client_t *c) { return c->ops && c->ops->size ? c->ops->size : sizeof(client_t); }

static void close_pipe(client_t *c) {
    if (c->wake_r >= 0) close(c->wake_r);
    if (c->wake_w >= 0) close(c->wake_w);
    c->wake_r = c->wake_w = -1;
    if (c->ops && c->ops->close_fds) c->ops->close_fds(c);
}

/*
 * Releases every native resource; runs without the GVL. The kind's steps
 * (client_kind_t) come in between the base's, in this order: what it holds
 * of the handle (a consumer's relay closed; a producer's topic handles), the
 * main queue's wake-up unhooked, its own queues (a consumer's queue emptied,
 * the main queue back from the relay), the main queue, the handle (with the
 * kind's destroy flags), what outlived the handle (the relay), the pipes.
 */
static void release_native(client_t *c) {
    const client_kind_t *kind = c->ops;
    if (c->pending) rd_kafka_event_destroy(c->pending);
    c->pending = NULL;
    if (kind && kind->release_start) kind->release_start(c);
    /* librdkafka must never write to a closed (possibly reused) fd number. */
    if (c->wake_w >= 0) rd_kafka_queue_io_event_enable(c->queue, -1, NULL, 0);
    if (kind && kind->release_queues) kind->release_queues(c);
    rd_kafka_queue_destroy(c->queue);
    int flags = kind && kind->destroy_flags ? kind->destroy_flags(c) : 0;
    if (flags) rd_kafka_destroy_flags(c->rk, flags);
    else rd_kafka_destroy(c->rk);
    if (kind && kind->release_end) kind->release_end(c);
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
    if (c->ops && c->ops->free_memory) c->ops->free_memory(c);
    if (!c->rk) {
        /* never created, or destroyed (released already: the hook finds nothing) */
        if (c->ops && c->ops->free_unstarted) c->ops->free_unstarted(c);
        xfree(c);
        return;
    }
    if (sluice_forked(c->pid)) {
        /* A forked child never touches the parent's handle; our fd copies are ours to close. */
        if (c->ops && c->ops->free_forked) c->ops->free_forked(c);
        close_pipe(c);
        xfree(c);
        return;
    }
    /* Collected without #destroy: hand the (possibly slow) teardown to a detached thread. */
    client_t *copy = malloc(struct_size(c));
    pthread_t thr;
    pthread_attr_t attr;
    if (copy) {
        memcpy(copy, c, struct_size(c));
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
    return struct_size(c) + (c->ops && c->ops->memsize ? c->ops->memsize(c) : 0);
}

static const rb_data_type_t client_type = {
    .wrap_struct_name = "Sluice::Native::Client",
    .function = {.dmark = client_mark, .dfree = client_free, .dsize = client_memsize, .dcompact = client_compact},
    .flags = RUBY_TYPED_FREE_IMMEDIATELY,
};

/* The kinds' tables, by class (sluice_client_kind): Producer, Consumer, Admin. */
static struct {
    VALUE klass;
    const client_kind_t *kind;
} kinds[4];
static int kind_count;

void sluice_client_kind(VALUE klass, const client_kind_t *kind) {
    if (kind_count == (int)(sizeof(kinds) / sizeof(kinds[0]))) rb_raise(rb_eRuntimeError, "too many client kinds");
    kinds[kind_count].klass = klass;
    kinds[kind_count].kind = kind;
    kind_count++;
}

static const client_kind_t *kind_of_class(VALUE klass) {
    for (int i = 0; i < kind_count; i++)
        if (klass == kinds[i].klass || RTEST(rb_class_inherited_p(klass, kinds[i].klass))) return kinds[i].kind;
    return NULL;
}

/* The kind's whole struct, zeroed, then its fields set by the kind (client_kind_t.init). */
static VALUE client_alloc(VALUE klass) {
    const client_kind_t *kind = kind_of_class(klass);
    size_t size = kind && kind->size ? kind->size : sizeof(client_t);
    VALUE self = rb_data_typed_object_zalloc(klass, size, &client_type);
    client_t *c = RTYPEDDATA_DATA(self);
    c->ops = kind;
    c->wake_r = c->wake_w = -1;
    c->pid = sluice_current_pid;
    if (kind && kind->init) kind->init(c);
    return self;
}

client_t *sluice_client_get(VALUE self) {
    client_t *c;
    TypedData_Get_Struct(self, client_t, &client_type, c);
    return c;
}

/* What to call the client in an error message, and what to raise once it is closed. */
static const char *kind_name(const client_t *c) { return c->ops ? c->ops->name : "client"; }
static VALUE closed_error(const client_t *c) { return c->ops ? *c->ops->closed_error : sluice_eProducerClosed; }

client_t *sluice_client_open(VALUE self) {
    client_t *c = sluice_client_get(self);
    if (sluice_forked(c->pid)) {
        const char *kind = kind_name(c);
        rb_raise(sluice_eForked, "this %s was created in process %d and cannot be used in forked process %d; "
                 "create a new %s in the child", kind, (int)c->pid, (int)sluice_current_pid, kind);
    }
    if (c->closed || !c->rk) rb_raise(closed_error(c), "%s is closed", kind_name(c));
    return c;
}

void sluice_client_refuse(client_t *c) {
    const char *why = c->ops && c->ops->refusal ? c->ops->refusal(c) : NULL;
    if (why) rb_raise(closed_error(c), "%s", why);
}

void sluice_client_raise_closed(const client_t *c) { rb_raise(closed_error(c), "%s is closed", kind_name(c)); }

rd_kafka_conf_t *sluice_conf_new(VALUE pairs, void (*each)(client_t *, const char *, const char *), client_t *c) {
    char errstr[512];
    Check_Type(pairs, T_ARRAY);
    long n = RARRAY_LEN(pairs);
    /* Convert everything first: nothing below may raise while conf is alive. */
    for (long i = 0; i < n; i++) {
        VALUE pair = rb_ary_entry(pairs, i);
        Check_Type(pair, T_ARRAY);
        if (RARRAY_LEN(pair) != 2) rb_raise(rb_eArgError, "config pairs must be [name, value]");
        sluice_cstr_at(pair, 0);
        sluice_cstr_at(pair, 1);
    }
    if (c->rk) rb_raise(rb_eRuntimeError, "client already initialized");
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    for (long i = 0; i < n; i++) {
        VALUE pair = rb_ary_entry(pairs, i);
        const char *name = sluice_cstr_at(pair, 0), *value = sluice_cstr_at(pair, 1);
        if (rd_kafka_conf_set(conf, name, value, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK) {
            rd_kafka_conf_destroy(conf);
            rb_raise(sluice_eConfigurationInvalid, "%s", errstr);
        }
        if (each) each(c, name, value);
    }
    rd_kafka_conf_set(conf, "log.queue", "true", NULL, 0);
    sluice_conf_set_resolver(conf);
    return conf;
}

#define WRONG_KIND " property and will be ignored by this "

/*
 * librdkafka accepts a property of the other client kind and only logs that it
 * ignores it (CONFWARN). Right after rd_kafka_new those warnings are on the
 * log queue (or in a consumer's relay): found there, so the caller can refuse
 * them. Returns a Ruby Array of their texts.
 */
static VALUE wrong_kind_properties(client_t *c, rd_kafka_t *rk) {
    const client_source_t *source = c->ops ? c->ops->source : NULL;
    if (source && source->find_logs) { /* logs reach the kind's own source (a consumer's relay) */
        char text[2048];
        VALUE found = rb_ary_new();
        if (source->find_logs(c, "CONFWARN", WRONG_KIND, text, sizeof(text))) rb_ary_push(found, rb_str_new_cstr(text));
        return found;
    }
    VALUE found = rb_ary_new();
    rd_kafka_queue_t *logs = rd_kafka_queue_new(rk);
    rd_kafka_set_log_queue(rk, logs);
    rd_kafka_event_t *ev;
    while ((ev = rd_kafka_queue_poll(logs, 0))) {
        const char *fac = NULL, *str = NULL;
        int level = 0;
        if (rd_kafka_event_type(ev) == RD_KAFKA_EVENT_LOG && !rd_kafka_event_log(ev, &fac, &str, &level) && fac && str &&
            !strcmp(fac, "CONFWARN") && strstr(str, WRONG_KIND))
            rb_ary_push(found, rb_str_new_cstr(str));
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_set_log_queue(rk, NULL); /* logs become events on the main queue, never a librdkafka thread callback */
    rd_kafka_queue_destroy(logs);
    return found;
}

static void *destroy_handle_nogvl(void *rk) {
    rd_kafka_destroy(rk);
    return NULL;
}

void sluice_client_start(VALUE self, client_t *c, rd_kafka_type_t kind, rd_kafka_conf_t *conf, int events, int strict) {
    char errstr[512];
    rd_kafka_conf_set_events(conf, events);
    rd_kafka_t *rk = rd_kafka_new(kind, conf, errstr, sizeof(errstr));
    if (!rk) {
        rd_kafka_conf_destroy(conf); /* not taken over on failure */
        rb_raise(sluice_eConfigurationInvalid, "%s", errstr);
    }
    VALUE refused = wrong_kind_properties(c, rk);
    if (strict && RARRAY_LEN(refused) > 0) {
        rb_thread_call_without_gvl(destroy_handle_nogvl, rk, NULL, NULL); /* nothing is connected yet: quick */
        rb_raise(sluice_eConfigurationInvalid, "%" PRIsVALUE, rb_ary_join(refused, rb_str_new_cstr("; ")));
    }
    c->rk = rk;
    c->kind = kind;
    c->queue = rd_kafka_queue_get_main(rk);
    c->pid = sluice_current_pid;
}

/* #oauthbearer_set_token(token, lifetime_ms, principal, extensions) -> nil or [code, message] */
static VALUE client_oauthbearer_set_token(VALUE self, VALUE token, VALUE lifetime, VALUE principal, VALUE extensions) {
    client_t *c = sluice_client_open(self);
    char errstr[512];
    Check_Type(extensions, T_ARRAY);
    long n = RARRAY_LEN(extensions);
    const char **ext = ALLOCA_N(const char *, n > 0 ? n : 1);
    for (long i = 0; i < n; i++) ext[i] = sluice_cstr_at(extensions, i);
    const char *tok = StringValueCStr(token), *princ = StringValueCStr(principal);
    rd_kafka_resp_err_t err = rd_kafka_oauthbearer_set_token(c->rk, tok, NUM2LL(lifetime), princ, ext, (size_t)n,
                                                             errstr, sizeof(errstr));
    if (!err) return Qnil;
    return rb_ary_new_from_args(2, INT2FIX(err), rb_str_new_cstr(errstr));
}

static VALUE client_oauthbearer_set_token_failure(VALUE self, VALUE reason) {
    client_t *c = sluice_client_open(self);
    return INT2FIX(rd_kafka_oauthbearer_set_token_failure(c->rk, StringValueCStr(reason)));
}

/* #fatal_error -> nil or [code, reason]; nil too once closed (nothing to report any more). */
static VALUE client_fatal_error(VALUE self) {
    client_t *c = sluice_client_get(self);
    char reason[512];
    if (c->closed || !c->rk || sluice_forked(c->pid)) return Qnil;
    rd_kafka_resp_err_t err = rd_kafka_fatal_error(c->rk, reason, sizeof(reason));
    return err ? rb_ary_new_from_args(2, INT2FIX(err), rb_str_new_cstr(reason)) : Qnil;
}

/*
 * A teardown the caller stops waiting for at its deadline: it goes on in its
 * own thread (on a copy of the struct, which the Ruby object no longer points
 * into) and frees itself when done. Whoever comes second frees it.
 */
struct teardown {
    client_t *copy; /* the kind's whole struct (malloc'd) */
    pthread_mutex_t lock;
    pthread_cond_t finished;
    int done, abandoned;
};

static void teardown_free(struct teardown *t) {
    pthread_mutex_destroy(&t->lock);
    pthread_cond_destroy(&t->finished);
    free(t->copy);
    free(t);
}

static void *teardown_run(void *p) {
    struct teardown *t = p;
    release_native(t->copy);
    pthread_mutex_lock(&t->lock);
    t->done = 1;
    int abandoned = t->abandoned;
    pthread_cond_signal(&t->finished);
    pthread_mutex_unlock(&t->lock);
    if (abandoned) teardown_free(t);
    return NULL;
}

/* Hands the struct's native resources over to t->copy: the struct keeps none (the kind forgets its own). */
static void hand_over(client_t *c, struct teardown *t) {
    memcpy(t->copy, c, struct_size(c));
    c->rk = NULL;
    c->queue = NULL;
    c->pending = NULL;
    c->wake_r = c->wake_w = -1;
    if (c->ops && c->ops->disown) c->ops->disown(c);
}

/* 1: released within timeout_ms; 0: still going on in its own thread; -1: no thread could be started. */
static int release_within(client_t *c, int timeout_ms) {
    struct teardown *t = calloc(1, sizeof(*t));
    if (t) t->copy = malloc(struct_size(c));
    if (!t || !t->copy) {
        free(t);
        return -1;
    }
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->finished, NULL);
    pthread_attr_t attr;
    pthread_t thr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    hand_over(c, t);
    int failed = pthread_create(&thr, &attr, teardown_run, t);
    pthread_attr_destroy(&attr);
    if (failed) {
        memcpy(c, t->copy, struct_size(c)); /* everything back: the struct owns it again */
        teardown_free(t);
        return -1;
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&t->lock);
    while (!t->done && pthread_cond_timedwait(&t->finished, &t->lock, &until) != ETIMEDOUT) {
    }
    int done = t->done;
    if (!done) t->abandoned = 1;
    pthread_mutex_unlock(&t->lock);
    if (done) teardown_free(t);
    return done;
}

struct destroy_args {
    client_t *c;
    int timeout_ms; /* < 0: no limit */
};

static void *destroy_nogvl(void *p) {
    struct destroy_args *a = p;
    client_t *c = a->c;
    /* Calls that released the GVL before #destroy marked us closed finish first
     * (flush slices notice `closed`; a blocking wait was yielded). Every such
     * call leaves the gate (gate.c) with c->busy decremented, whatever happened. */
    while (__atomic_load_n(&c->busy, __ATOMIC_SEQ_CST) > 0) usleep(1000);
    if (a->timeout_ms < 0 || release_within(c, a->timeout_ms) < 0) release_native(c);
    return NULL;
}

/*
 * #destroy(timeout_ms = nil) — idempotent. Refuses every later call, waits for
 * GVL-released calls in flight, then destroys the handle without the GVL. In a
 * forked child it only marks the handle closed (the parent owns it).
 *
 * With timeout_ms, the teardown (rd_kafka_destroy) is waited for that long at
 * most: what is left of it (a commit to a coordinator that does not answer)
 * goes on in a thread of its own, and the object is closed either way.
 *
 * An interrupt already pending stops the teardown before it starts and is
 * raised; the handle stays refused and a later #destroy (or GC) finishes the
 * job. Callers that must not be cut short mask interrupts around it
 * (Thread.handle_interrupt): then the teardown runs and they arrive after.
 */
static VALUE client_destroy(int argc, VALUE *argv, VALUE self) {
    VALUE timeout;
    rb_scan_args(argc, argv, "01", &timeout);
    client_t *c = sluice_client_get(self);
    if (!c->rk) return Qnil;
    __atomic_store_n(&c->closed, 1, __ATOMIC_SEQ_CST);
    if (sluice_forked(c->pid)) {
        close_pipe(c); /* the handle is the parent's: never ours to destroy */
        return Qnil;
    }
    struct destroy_args a = {c, NIL_P(timeout) ? -1 : NUM2INT(timeout)};
    if (!NIL_P(timeout) && a.timeout_ms < 0) a.timeout_ms = 0;
    while (c->rk) {
        rd_kafka_queue_yield(c->queue); /* ends a blocking #wait_events of another thread */
        /* No unblock function: a half-destroyed handle is worse than a late
         * interrupt. (A no-op one is not the same: on a lone main thread Ruby
         * starts a helper thread for it, and kills and joins that thread
         * afterwards — forever, when the caller masks interrupts.) */
        rb_thread_call_without_gvl2(destroy_nogvl, &a, NULL, NULL);
        if (c->rk) sluice_raise_pending_interrupts(); /* not run: serve what is pending, then try again */
    }
    return Qnil;
}

static VALUE client_closed_p(VALUE self) {
    client_t *c = sluice_client_get(self);
    return (c->closed || !c->rk || sluice_forked(c->pid)) ? Qtrue : Qfalse;
}

static VALUE client_forked_p(VALUE self) { return sluice_forked(sluice_client_get(self)->pid) ? Qtrue : Qfalse; }

/* #progress -> Integer: messages delivered (a producer) or fetched (a consumer) so far; grows only
 * while the brokers accept the client (Polling::AuthWatch tells a past refusal from a current one). */
static VALUE client_progress(VALUE self) {
    client_t *c = sluice_client_get(self);
    return ULONG2NUM(c->progress);
}

VALUE sluice_init_client(void) {
    VALUE klass = rb_define_class_under(sluice_mNative, "Client", rb_cObject);
    rb_define_alloc_func(klass, client_alloc);
    rb_define_method(klass, "oauthbearer_set_token", client_oauthbearer_set_token, 4);
    rb_define_method(klass, "oauthbearer_set_token_failure", client_oauthbearer_set_token_failure, 1);
    rb_define_method(klass, "fatal_error", client_fatal_error, 0);
    rb_define_method(klass, "destroy", client_destroy, -1);
    rb_define_method(klass, "closed?", client_closed_p, 0);
    rb_define_method(klass, "forked?", client_forked_p, 0);
    rb_define_method(klass, "progress", client_progress, 0);
    return klass;
}
