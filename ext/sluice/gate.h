/*
 * gate.c: the one gate every GVL-released librdkafka call of a client passes,
 * so #destroy (and a consumer's close) can wait for the calls in progress.
 *
 * A call enters and leaves it in two halves around the caller's cleanup:
 *
 *   sluice_gate_enter(c, fn, &args, ubf, &args, release);
 *   ...take fn's results into safe hands: keep events, convert and destroy
 *      error objects, drop references (nothing here may raise)...
 *   sluice_gate_leave(c);
 *
 * sluice_gate_enter runs fn(arg) without the GVL, counted in c->busy so
 * #destroy waits until the caller has left the gate. It returns only once fn
 * ran: an interrupt pending before the call is served first (and raised, if
 * it is a real one, before anything happened). One that arrives during the
 * call stays pending until sluice_gate_leave, which ends the count and then
 * raises it. So a Timeout or Thread#raise never skips cleanup, #close works
 * after any interrupted call, and a routine interrupt (the scheduler's timer)
 * never makes a call look as if it ran. When the gate raises instead of
 * running fn (that interrupt, or the client closed by another thread
 * meanwhile), release(arg) runs first, if given: what the caller allocated
 * for fn (partition lists, topic specs) is freed, not lost. It has then not
 * entered: the caller does not leave.
 *
 * A call that must not be cut short passes no unblock function (NULL), never a
 * no-op one: on a lone main thread Ruby starts a helper thread for an unblock
 * function and kills and joins it afterwards, which hangs when the caller
 * masks interrupts (Thread.handle_interrupt), as transactions and close do.
 * Such a call is also counted in c->calls while inside librdkafka, and is
 * refused once a consumer's close began (consumer.c).
 */
#ifndef SLUICE_GATE_H
#define SLUICE_GATE_H

#include "client.h"

void sluice_gate_enter(client_t *c, void *(*fn)(void *), void *arg, rb_unblock_function_t *ubf, void *ubf_arg,
                       void (*release)(void *));
void sluice_gate_leave(client_t *c);
/* Leaves the gate for a call whose results must reach Ruby before any
 * interrupt does (#consume: what it took is handed out, never dropped): ends
 * the count and leaves a pending interrupt to Ruby's next check, as a call
 * that kept the GVL would. */
static inline void sluice_gate_leave_deferred(client_t *c) { __atomic_sub_fetch(&c->busy, 1, __ATOMIC_SEQ_CST); }

#endif
