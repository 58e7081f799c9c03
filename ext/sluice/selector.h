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
 * array from it, the others mirror it in a kernel set.
 */
#ifndef SLUICE_SELECTOR_H
#define SLUICE_SELECTOR_H

#include "sluice.h"

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

/* ---- implemented by the backend built ---- */

extern const char sluice_selector_backend[]; /* "epoll", "kqueue" or "poll" */

/* Sets up s->set_fd watching s->wake_r (reported as SELECTOR_WAKE_TOKEN). -1 with errno. */
int sluice_backend_open(selector_t *s);
/* Releases s->set_fd; in a forked child too (sluice_forked(s->pid)). */
void sluice_backend_close(selector_t *s);
/* Watches fd for reading; the registry already holds room for it. -1 with errno. */
int sluice_backend_add(selector_t *s, int fd, uint32_t token);
/* Stops watching fd. -1 with errno (ENOENT or EBADF: the fd was closed meanwhile). */
int sluice_backend_remove(selector_t *s, int fd);
/*
 * Waits at most timeout_ms (negative: no limit) with the GVL released only
 * around the system call (sluice_selector_blocking) and returns the tokens of
 * the ready fds. *woken tells whether the interrupt fd was ready; it is not
 * read here, and no pending Ruby interrupt is raised here.
 */
VALUE sluice_backend_wait(selector_t *s, int timeout_ms, int *woken);

/* ---- selector.c, for the backends ---- */

/* fn(arg) without the GVL; #wakeup and Ruby interrupts end it early through the
 * interrupt fd. Never raises; fn does not run when an interrupt is already pending. */
void sluice_selector_blocking(selector_t *s, void *(*fn)(void *), void *arg);
/* Makes a wait in progress (or the next one) return. */
void sluice_selector_signal(selector_t *s);

#endif
