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
#include "relay.h"
#include "values.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
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

/* The next main-queue event of a producer (a consumer's come through its relay). */
static rd_kafka_event_t *next_event(client_t *c) {
    rd_kafka_event_t *ev = c->pending;
    if (ev) {
        c->pending = NULL;
        return ev;
    }
    return rd_kafka_queue_poll(c->queue, 0);
}

/* A consumer's pending OAUTHBEARER refresh requests (its length is asked
 * first: polling a consumer's queue counts as the application polling). */
static size_t sasl_left(client_t *c) { return c->consumer.sasl_queue ? rd_kafka_queue_length(c->consumer.sasl_queue) : 0; }

/* The next item of a consumer's relay (or SASL queue) into batch; false when there was none. */
static int serve_relayed(client_t *c, VALUE batch) {
    relay_item_t item;
    if (sasl_left(c) > 0) {
        rd_kafka_event_t *ev = rd_kafka_queue_poll(c->consumer.sasl_queue, 0);
        if (ev) {
            serve_event(c, ev, batch, 0);
            rd_kafka_event_destroy(ev);
            return 1;
        }
    }
    if (!sluice_relay_pop(c->consumer.relay, &item)) return 0;
    if (item.event) serve_event(c, item.event, batch, 0);
    else push4(batch, sym_log, INT2FIX(item.level), rb_str_new_cstr(item.fac), rb_str_new_cstr(item.line));
    sluice_relay_item_free(&item);
    return 1;
}

static size_t events_left(client_t *c) {
    return c->consumer.relay ? sluice_relay_length(c->consumer.relay) + sasl_left(c) : rd_kafka_queue_length(c->queue);
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
    for (;;) {
        if (c->consumer.relay) {
            if (NIL_P(batch)) batch = rb_ary_new();
            if (!serve_relayed(c, batch)) break;
        } else {
            rd_kafka_event_t *ev = next_event(c);
            if (!ev) break;
            if (NIL_P(batch)) batch = rb_ary_new();
            serve_event(c, ev, batch, RTEST(acks));
            rd_kafka_event_destroy(ev);
        }
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
    if (a->c->consumer.relay) { /* a consumer: wait for the relay's wake-up, never poll the handle */
        struct pollfd pfd = {.fd = a->c->wake_r, .events = POLLIN};
        if (events_left(a->c) == 0) poll(&pfd, 1, a->timeout_ms);
        return NULL;
    }
    a->c->pending = rd_kafka_queue_poll(a->c->queue, a->timeout_ms);
    return NULL;
}

static void interrupt(client_t *c) {
    if (c->consumer.relay) {
        if (write(c->wake_w, "1", 1) < 0) {
            /* EAGAIN: a wake-up is pending already */
        }
    } else {
        rd_kafka_queue_yield(c->queue);
    }
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
    VALUE ready = c->pending || (c->consumer.relay && events_left(c) > 0) ? Qtrue : Qfalse;
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
    if (c->wake_r >= 0) return INT2FIX(c->wake_r); /* a consumer's exists from the start (the relay writes it) */
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
    if (c->wake_w < 0 || c->consumer.relay) return Qnil; /* the relay's pipe lives as long as the handle */
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
