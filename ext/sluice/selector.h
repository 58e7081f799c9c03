/*
 * Sluice::Native::Selector — what selector.c shares with the backend that
 * extconf.rb chose (SLUICE_SELECTOR_EPOLL, _KQUEUE or _POLL):
 *
 *   selector.c         the Ruby class, the registry of fds and tokens, the
 *                      interrupt fd, fork rules, GVL release
 *   selector_epoll.c   Linux
 *   selector_kqueue.c  macOS and the BSDs
 *   selector_poll.c    POSIX poll(2), anywhere (SLUICE_SELECTOR=poll forces it)
 *
 * The registry is kept by selector.c for every backend, so duplicates, #count
 * and #remove behave the same everywhere; the poll backend builds its pollfd
 * array from it, the others mirror it in a kernel set. A backend holds only
 * its system calls: what is the same for all of them (the interrupt fd's
 * registration, error handling, tokens to Ruby) is selector.c's.
 */
#ifndef SLUICE_SELECTOR_H
#define SLUICE_SELECTOR_H

#include "common.h"

#include <unistd.h>

#define SELECTOR_WAKE_TOKEN UINT32_MAX /* tokens are 0..INT32_MAX */
#define SELECTOR_MAX_EVENTS 512        /* per epoll/kqueue wait; level-triggered, the rest come next wait */

typedef struct {
    int fd;
    uint32_t token;
    int closed; /* poll found it closed without #remove: no longer polled (the kernel sets drop such fds too) */
} selector_entry_t;

typedef struct {
    int set_fd;               /* the kernel set (epoll, kqueue); -1 for poll */
    int wake_r, wake_w;       /* the interrupt: one eventfd (wake_r == wake_w) or a pipe; -1 once closed */
    pid_t pid;                /* in a forked child the selector can only be closed */
    int waiting;              /* threads inside a wait (GVL released) */
    selector_entry_t *entries; /* registered fds, dense, in no order */
    long count, capa;
    int32_t *index_of;        /* fd -> index in entries, -1 when not registered */
    long index_capa;
} selector_t;

/* The index of fd in s->entries, or -1. */
static inline long selector_find(const selector_t *s, int fd) {
    return fd >= 0 && fd < s->index_capa ? s->index_of[fd] : -1;
}

/*
 * ---- implemented by the backend built: its system calls, nothing else ----
 * (selector.c keeps the registry, registers the interrupt fd, turns ready
 * tokens into Ruby's Array and raises; every function here reports errors as
 * -1 with errno set.)
 */

extern const char sluice_selector_backend[];   /* "epoll", "kqueue" or "poll" */
extern const char sluice_selector_wait_call[]; /* its wait's system call, for the error message */

/* Creates the kernel set in s->set_fd (nothing for poll). On failure selector.c calls sluice_backend_close. */
int sluice_backend_open(selector_t *s);
/* Releases s->set_fd; in a forked child too (sluice_forked(s->pid)). */
void sluice_backend_close(selector_t *s);
/* Watches fd for reading (the interrupt fd too, as SELECTOR_WAKE_TOKEN); the registry already holds room for it. */
int sluice_backend_add(selector_t *s, int fd, uint32_t token);
/* Stops watching fd (ENOENT or EBADF: the fd was closed meanwhile). */
int sluice_backend_remove(selector_t *s, int fd);
/*
 * Waits at most timeout_ms (negative: no limit) with the GVL released only
 * around the system call (sluice_selector_blocking), then writes the tokens
 * of at most room ready fds into ready (room >= the registry's count + 1):
 * how many. Reads nothing, raises nothing: an interrupt pending before the
 * call means no wait and 0 tokens.
 */
int sluice_backend_wait(selector_t *s, int timeout_ms, uint32_t *ready, int room);

/*
 * ---- for selector.c and the backends alike ----
 * (here, not in selector.c, so a backend calls nothing of selector.c's: the
 * two only meet through the functions above, and no call circle joins them)
 */

/* Makes a wait in progress (or the next one) return. */
static inline void sluice_selector_signal(selector_t *s) {
#ifdef SLUICE_WAKE_EVENTFD
    uint64_t one = 1;
    if (write(s->wake_w, &one, sizeof(one)) < 0) {
        /* EAGAIN: a wake-up is already pending */
    }
#else
    if (write(s->wake_w, "", 1) < 0) {
        /* EAGAIN: the pipe is full of wake-ups already */
    }
#endif
}

static inline void sluice_selector_wait_ubf(void *s) { sluice_selector_signal(s); }

/* fn(arg) without the GVL; #wakeup and Ruby interrupts end it early through the
 * interrupt fd. Never raises; fn does not run when an interrupt is already pending. */
static inline void sluice_selector_blocking(selector_t *s, void *(*fn)(void *), void *arg) {
    s->waiting++;
    rb_thread_call_without_gvl2(fn, arg, sluice_selector_wait_ubf, s);
    s->waiting--;
}

#endif
