/*
 * The kqueue backend (macOS, the BSDs): like epoll, registrations live in the
 * kernel and a wait returns only the ready fds.
 *
 * A kqueue is not inherited across fork: in a child the fd number is not ours
 * (it may already name another file), so a forked child never closes it.
 * Closing a watched fd removes its event, which #remove then reports as ENOENT
 * or EBADF. The kqueue fd is close-on-exec; it is never read or written, and
 * macOS refuses O_NONBLOCK on it (no FIONBIO for kqueues).
 */
#include "selector.h"

#ifdef SLUICE_SELECTOR_KQUEUE
#include <errno.h>
#include <fcntl.h>
#include <sys/types.h>
#include <sys/event.h>
#include <sys/time.h>
#include <unistd.h>

const char sluice_selector_backend[] = "kqueue";
const char sluice_selector_wait_call[] = "kevent";

static int change(int kq, int fd, int flags, uint32_t token) {
    struct kevent ev;
    EV_SET(&ev, fd, EVFILT_READ, flags, 0, 0, (void *)(uintptr_t)token);
    return kevent(kq, &ev, 1, NULL, 0, NULL);
}

int sluice_backend_open(selector_t *s) {
    s->set_fd = kqueue();
    if (s->set_fd < 0) return -1;
    return fcntl(s->set_fd, F_SETFD, FD_CLOEXEC) < 0 ? -1 : 0;
}

void sluice_backend_close(selector_t *s) {
    if (s->set_fd >= 0 && !sluice_forked(s->pid)) close(s->set_fd);
    s->set_fd = -1;
}

int sluice_backend_add(selector_t *s, int fd, uint32_t token) { return change(s->set_fd, fd, EV_ADD, token); }

int sluice_backend_remove(selector_t *s, int fd) { return change(s->set_fd, fd, EV_DELETE, 0); }

struct wait_args {
    int kq, timeout_ms, room, count, err;
    struct kevent events[SELECTOR_MAX_EVENTS];
};

static void *wait_nogvl(void *p) {
    struct wait_args *a = p;
    struct timespec ts = {a->timeout_ms / 1000, (long)(a->timeout_ms % 1000) * 1000000};
    a->count = kevent(a->kq, NULL, 0, a->events, a->room, a->timeout_ms < 0 ? NULL : &ts);
    a->err = errno;
    return NULL;
}

int sluice_backend_wait(selector_t *s, int timeout_ms, uint32_t *ready, int room) {
    struct wait_args a;
    a.kq = s->set_fd;
    a.timeout_ms = timeout_ms;
    a.room = room < SELECTOR_MAX_EVENTS ? room : SELECTOR_MAX_EVENTS;
    a.count = a.err = 0;
    sluice_selector_blocking(s, wait_nogvl, &a);
    if (a.count < 0) errno = a.err;
    for (int i = 0; i < a.count; i++) ready[i] = (uint32_t)(uintptr_t)a.events[i].udata;
    return a.count;
}
#endif
