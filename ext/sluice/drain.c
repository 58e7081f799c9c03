/*
 * The main queue of a client: delivery reports, errors, statistics, OAuth
 * refresh requests and logs, turned into plain data by #drain (GVL held,
 * non-blocking) and waited for by #wait_events (:thread mode, GVL released) or
 * through the wake-up pipe (:fd mode, the poller's selector).
 */
#include "client.h"
#include "gate.h"
#include "init.h"
#include "partition_list.h"
#include "values.h"

#include <errno.h>
#include <math.h>
#include <unistd.h>

static VALUE sym_error, sym_statistics, sym_oauthbearer_token_refresh, sym_log, sym_offset_commit, sym_admin_result;

static void push4(VALUE batch, VALUE a, VALUE b, VALUE c, VALUE d) {
    VALUE v[4] = {a, b, c, d};
    rb_ary_cat(batch, v, 4);
}

/*
 * A delivery report goes to its kind (client_kind_t.delivery: the producer's
 * in-flight table), which records a success on the handle right there,
 * because this is the one per-message step of every produce; Ruby sees the
 * handle again only when it asked to (acks != 0: someone listens to
 * message.acknowledged). A failed delivery goes to Ruby whole, which builds
 * the KafkaError. Events of a kind's own (admin results) are its to read
 * (client_kind_t.result).
 */
static void serve_event(client_t *c, rd_kafka_event_t *ev, VALUE batch, int acks) {
    switch (rd_kafka_event_type(ev)) {
    case RD_KAFKA_EVENT_DR: {
        if (!c->ops || !c->ops->delivery) break;
        const rd_kafka_message_t *msg;
        while ((msg = rd_kafka_event_message_next(ev))) {
            VALUE handle = c->ops->delivery(c, msg);
            if (NIL_P(handle)) continue;
            if (msg->err) push4(batch, handle, INT2FIX(msg->partition), LL2NUM(msg->offset), INT2FIX(msg->err));
            else if (acks) push4(batch, handle, Qnil, Qnil, INT2FIX(0));
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
    case RD_KAFKA_EVENT_OFFSET_COMMIT: /* a consumer's commit (async, or librdkafka's auto-commit) */
        push4(batch, sym_offset_commit, INT2FIX(rd_kafka_event_error(ev)),
              sluice_partitions_to_ary(rd_kafka_event_topic_partition_list(ev)), Qnil);
        break;
    case RD_KAFKA_EVENT_STATS:
        push4(batch, sym_statistics, sluice_str_or_nil(rd_kafka_event_stats(ev)), Qnil, Qnil);
        break;
    case RD_KAFKA_EVENT_OAUTHBEARER_TOKEN_REFRESH:
        push4(batch, sym_oauthbearer_token_refresh, sluice_str_or_nil(rd_kafka_event_config_string(ev)), Qnil, Qnil);
        break;
    case RD_KAFKA_EVENT_LOG: {
        const char *fac = NULL, *str = NULL;
        int level = 6;
        rd_kafka_event_log(ev, &fac, &str, &level);
        push4(batch, sym_log, INT2FIX(level), sluice_str_or_nil(fac), sluice_str_or_nil(str));
        break;
    }
    default: { /* a kind's own (an admin request's result: admin.c) */
        VALUE result = c->ops && c->ops->result ? c->ops->result(ev) : Qundef;
        if (result != Qundef) push4(batch, sym_admin_result, result, Qnil, Qnil);
        break;
    }
    }
}

/* Where the client's events come from: its kind's own source (a consumer's relay), or NULL: its main queue. */
static const client_source_t *source_of(const client_t *c) { return c->ops ? c->ops->source : NULL; }

/* The next event (or, from a kind's source, log line) into *item; false when there is none. */
static int take_next(client_t *c, event_item_t *item) {
    const client_source_t *source = source_of(c);
    if (source) return source->take(c, item);
    *item = (event_item_t){.event = c->pending};
    if (item->event) {
        c->pending = NULL;
        return 1;
    }
    return (item->event = rd_kafka_queue_poll(c->queue, 0)) != NULL;
}

static size_t events_left(client_t *c) {
    const client_source_t *source = source_of(c);
    return source ? source->left(c) : rd_kafka_queue_length(c->queue);
}

struct serve_args {
    client_t *c;
    VALUE *batch; /* made with the first item */
    event_item_t *item;
    int acks;
};

/* An item into the batch (with the GVL; raises only NoMemoryError: see #drain). */
static VALUE serve_item(VALUE p) {
    struct serve_args *a = (struct serve_args *)p;
    if (NIL_P(*a->batch)) *a->batch = rb_ary_new();
    if (a->item->event) serve_event(a->c, a->item->event, *a->batch, a->acks);
    else push4(*a->batch, sym_log, INT2FIX(a->item->level), rb_str_new_cstr(a->item->fac), rb_str_new_cstr(a->item->line));
    return Qnil;
}

static void empty_pipe(int fd) {
    char buf[64];
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
}

/*
 * #drain(budget_ms, acks) -> Array or nil
 *
 * Empties the wake-up pipe, then polls without blocking and with the GVL held
 * until the queue is empty or budget_ms (negative: no budget) is spent. The
 * pipe is read here, by the client about to serve its queue, and not by the
 * selector: a wake-up is consumed only when the events it announced are
 * served, so an interrupt between the two can never lose one. Successful
 * deliveries are recorded on their handles (see serve_event). Returns nil when
 * nothing is left for Ruby, else a flat Array of quads in queue order:
 *   handle, partition, offset, error_code   (a failed delivery, to resolve)
 *   handle, nil, nil, 0                     (delivered; only when acks is true)
 *   :error, code, reason, fatal
 *   :statistics, json, nil, nil
 *   :oauthbearer_token_refresh, config, nil, nil
 *   :log, level, facility, message
 *   :offset_commit, code, [[topic, partition, offset, err], ...], nil   (consumers)
 *   :admin_result, [request_id, code, message, payload], nil, nil   (admin clients, see admin.c)
 * #exhausted? then tells whether the budget ran out with events left.
 */
static VALUE client_drain(VALUE self, VALUE budget, VALUE acks) {
    client_t *c = sluice_client_open(self);
    VALUE batch = Qnil; /* made with the first event (an idle client's periodic poll allocates nothing), returned only when Ruby has work */
    double budget_ms = NUM2DBL(budget);
    double deadline = budget_ms < 0 ? INFINITY : sluice_now_ms() + budget_ms;
    if (c->wake_r >= 0) empty_pipe(c->wake_r);
    c->exhausted = 0;
    for (event_item_t item; take_next(c, &item);) {
        /* Ruby allocates while serving: a NoMemoryError must not leak the item taken. */
        struct serve_args a = {c, &batch, &item, RTEST(acks)};
        int state = 0;
        rb_protect(serve_item, (VALUE)&a, &state);
        sluice_event_item_free(&item);
        if (state) rb_jump_tag(state);
        if (sluice_now_ms() >= deadline) {
            c->exhausted = events_left(c) > 0;
            break;
        }
    }
    return !NIL_P(batch) && RARRAY_LEN(batch) ? batch : Qnil;
}

/*
 * #idle? -> true when nothing waits for #drain (no event taken, the queue
 * empty). A periodic poll of such a client skips the drain and its pipe read:
 * a byte left in the pipe keeps it readable (the selector is level-triggered),
 * so the wake-up path still consumes it.
 */
static VALUE client_idle_p(VALUE self) {
    client_t *c = sluice_client_open(self);
    return !c->pending && events_left(c) == 0 ? Qtrue : Qfalse;
}

static VALUE client_exhausted_p(VALUE self) { return sluice_client_get(self)->exhausted ? Qtrue : Qfalse; }

struct wait_args {
    client_t *c;
    int timeout_ms;
};

/* The event is stored before the gate lets #destroy proceed: it is never lost or leaked. */
static void *wait_events_nogvl(void *p) {
    struct wait_args *a = p;
    const client_source_t *source = source_of(a->c);
    if (source) source->wait(a->c, a->timeout_ms); /* the source's own wake-up (a consumer's: never a poll of the handle) */
    else a->c->pending = rd_kafka_queue_poll(a->c->queue, a->timeout_ms);
    return NULL;
}

static void interrupt(client_t *c) {
    const client_source_t *source = source_of(c);
    if (source) source->interrupt(c);
    else rd_kafka_queue_yield(c->queue);
}

static void wait_events_ubf(void *p) { interrupt(((struct wait_args *)p)->c); }

/*
 * #wait_events(timeout_ms) -> true if an event is ready for #drain
 *
 * The blocking poll of :thread mode: GVL released, interruptible (Thread#raise,
 * #kill, #interrupt_wait all yield the queue). The event it takes is kept for
 * the next #drain, which serves it with the GVL held.
 */
static VALUE client_wait_events(VALUE self, VALUE timeout) {
    client_t *c = sluice_client_open(self);
    if (c->pending) return Qtrue;
    struct wait_args a = {c, NUM2INT(timeout)};
    sluice_gate_enter(c, wait_events_nogvl, &a, wait_events_ubf, &a, NULL);
    VALUE ready = c->pending || (source_of(c) && events_left(c) > 0) ? Qtrue : Qfalse;
    sluice_gate_leave(c);
    return ready;
}

/* #interrupt_wait — makes a blocking #wait_events in another thread return now. */
static VALUE client_interrupt_wait(VALUE self) {
    client_t *c = sluice_client_get(self);
    if (c->queue && !c->closed && !sluice_forked(c->pid)) interrupt(c);
    return Qnil;
}

/*
 * #wakeup_enable -> read fd
 *
 * Opens a non-blocking, close-on-exec pipe and hands its write end to
 * librdkafka: it writes one byte when the main queue goes from empty to
 * non-empty (a wake-up signal; the events stay on the queue). Events already
 * queued give no wake-up, so the caller must poll once after enabling.
 */
static VALUE client_wakeup_enable(VALUE self) {
    client_t *c = sluice_client_open(self);
    if (c->wake_r >= 0) return INT2FIX(c->wake_r); /* a source's exists from the start (a consumer's relay writes it) */
    int fds[2];
    if (sluice_pipe(fds) < 0) rb_sys_fail("pipe");
    c->wake_r = fds[0];
    c->wake_w = fds[1];
    rd_kafka_queue_io_event_enable(c->queue, c->wake_w, "1", 1);
    return INT2FIX(c->wake_r);
}

/* #wakeup_disable — IO events off first, then the pipe is closed. */
static VALUE client_wakeup_disable(VALUE self) {
    client_t *c = sluice_client_get(self);
    if (c->wake_w < 0 || source_of(c)) return Qnil; /* a source's pipe lives as long as the handle */
    if (!sluice_forked(c->pid) && c->queue) rd_kafka_queue_io_event_enable(c->queue, -1, NULL, 0);
    close(c->wake_r);
    close(c->wake_w);
    c->wake_r = c->wake_w = -1;
    return Qnil;
}

/* #wakeup_signal — writes a wake-up ourselves (a drain that ran out of budget re-arms). */
static VALUE client_wakeup_signal(VALUE self) {
    client_t *c = sluice_client_get(self);
    if (c->wake_w >= 0 && write(c->wake_w, "1", 1) < 0 && errno != EAGAIN) rb_sys_fail("write");
    return Qnil;
}

static VALUE client_wakeup_fd(VALUE self) {
    client_t *c = sluice_client_get(self);
    return c->wake_r >= 0 ? INT2FIX(c->wake_r) : Qnil;
}

void sluice_init_drain(VALUE klass) {
    rb_define_method(klass, "drain", client_drain, 2);
    rb_define_method(klass, "exhausted?", client_exhausted_p, 0);
    rb_define_method(klass, "idle?", client_idle_p, 0);
    rb_define_method(klass, "wait_events", client_wait_events, 1);
    rb_define_method(klass, "interrupt_wait", client_interrupt_wait, 0);
    rb_define_method(klass, "wakeup_enable", client_wakeup_enable, 0);
    rb_define_method(klass, "wakeup_disable", client_wakeup_disable, 0);
    rb_define_method(klass, "wakeup_signal", client_wakeup_signal, 0);
    rb_define_method(klass, "wakeup_fd", client_wakeup_fd, 0);

    sym_error = ID2SYM(rb_intern("error"));
    sym_statistics = ID2SYM(rb_intern("statistics"));
    sym_oauthbearer_token_refresh = ID2SYM(rb_intern("oauthbearer_token_refresh"));
    sym_log = ID2SYM(rb_intern("log"));
    sym_offset_commit = ID2SYM(rb_intern("offset_commit"));
    sym_admin_result = ID2SYM(rb_intern("admin_result"));
}
