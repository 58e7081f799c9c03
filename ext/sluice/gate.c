/*
 * The gate of a client's GVL-released calls (gate.h says how a call passes it).
 *
 * Invariant: c->busy counts the calls between their sluice_gate_enter and
 * their leave; c->calls, those without unblock function while fn runs. Only
 * the gate changes them, and it counts a call in with the GVL held, after the
 * checks that refuse it: #destroy and a consumer's close, which set their
 * flags with the GVL held, see every call that got past those checks.
 *
 * Like client.c it knows no client kind: a kind's refusal (a consumer's
 * close) and its closed error come from its table (client_kind_t, client.h).
 */
#include "gate.h"

#include "client.h"

struct gate_call {
    void *(*fn)(void *);
    void *arg;
    int ran;
    int *calls; /* counted in, or NULL */
};

static void *run_without_gvl(void *p) { /* runs without the GVL */
    struct gate_call *b = p;
    b->ran = 1;
    void *out = b->fn(b->arg);
    /* out of librdkafka: a closing consumer need not wait for what the caller does next */
    if (b->calls) __atomic_sub_fetch(b->calls, 1, __ATOMIC_SEQ_CST);
    return out;
}

static VALUE raise_pending_interrupts(VALUE unused) {
    sluice_raise_pending_interrupts();
    return Qnil;
}

void sluice_gate_enter(client_t *c, void *(*fn)(void *), void *arg, rb_unblock_function_t *ubf, void *ubf_arg,
                       void (*release)(void *)) {
    /* A call with an unblock function (a wait for events) is cut short by
     * close; one without is waited for, so is counted in c->calls. Only those
     * are refused once a consumer's close began: a wait on the main queue
     * (#wait_events, its own polling thread in :thread mode) makes no group
     * call, and what it serves meanwhile (the close's commit result, errors)
     * is still wanted. */
    struct gate_call b = {fn, arg, 0, ubf ? NULL : &c->calls};
    const char *(*refusal)(client_t *) = !ubf && c->ops ? c->ops->refusal : NULL;
    for (;;) {
        const char *why = refusal ? refusal(c) : NULL;
        if (why) {
            if (release) release(arg);
            rb_raise(*c->ops->closed_error, "%s", why);
        }
        /* checked and counted with the GVL held: a close starting now sees this call */
        if (b.calls) __atomic_add_fetch(b.calls, 1, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&c->busy, 1, __ATOMIC_SEQ_CST);
        rb_thread_call_without_gvl2(run_without_gvl, &b, ubf, ubf_arg);
        if (b.ran) return;
        if (b.calls) __atomic_sub_fetch(b.calls, 1, __ATOMIC_SEQ_CST);
        /* Not run: an interrupt was pending. Most are routine (the thread
         * scheduler's timer, a signal for another thread) and raise nothing:
         * serve them and go again. A real one is raised here, before the call
         * did anything. Either way the handle may be gone afterwards. */
        __atomic_sub_fetch(&c->busy, 1, __ATOMIC_SEQ_CST);
        if (!release) {
            sluice_raise_pending_interrupts();
        } else {
            int state = 0;
            rb_protect(raise_pending_interrupts, Qnil, &state);
            if (state) {
                release(arg);
                rb_jump_tag(state);
            }
        }
        if (c->closed || !c->rk) {
            if (release) release(arg);
            sluice_client_raise_closed(c);
        }
    }
}

void sluice_gate_leave(client_t *c) {
    __atomic_sub_fetch(&c->busy, 1, __ATOMIC_SEQ_CST);
    sluice_raise_pending_interrupts();
}

