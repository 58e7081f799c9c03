/*
 * The epoll backend (Linux): registrations are epoll_ctl calls, so no fd list
 * is rebuilt per wait and a wait costs the same for 1 or 1,000 producers: only
 * ready fds come back.
 *
 * In a forked child the epoll set is shared with the parent: the child closes
 * its copy of the fd and never calls epoll_ctl on it.
 */
#include "selector.h"

#ifdef SLUICE_SELECTOR_EPOLL
#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

const char sluice_selector_backend[] = "epoll";
const char sluice_selector_wait_call[] = "epoll_wait";

int sluice_backend_open(selector_t *s) {
    s->set_fd = epoll_create1(EPOLL_CLOEXEC);
    if (s->set_fd < 0) return -1;
    return fcntl(s->set_fd, F_SETFL, O_NONBLOCK) < 0 ? -1 : 0;
}

void sluice_backend_close(selector_t *s) {
    if (s->set_fd >= 0) close(s->set_fd);
    s->set_fd = -1;
}

int sluice_backend_add(selector_t *s, int fd, uint32_t token) {
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = token};
    return epoll_ctl(s->set_fd, EPOLL_CTL_ADD, fd, &ev);
}

int sluice_backend_remove(selector_t *s, int fd) { return epoll_ctl(s->set_fd, EPOLL_CTL_DEL, fd, NULL); }

struct wait_args {
    int epfd, timeout_ms, room, count, err;
    struct epoll_event events[SELECTOR_MAX_EVENTS];
};

static void *wait_nogvl(void *p) {
    struct wait_args *a = p;
    a->count = epoll_wait(a->epfd, a->events, a->room, a->timeout_ms);
    a->err = errno;
    return NULL;
}

int sluice_backend_wait(selector_t *s, int timeout_ms, uint32_t *ready, int room) {
    struct wait_args a;
    a.epfd = s->set_fd;
    a.timeout_ms = timeout_ms;
    a.room = room < SELECTOR_MAX_EVENTS ? room : SELECTOR_MAX_EVENTS;
    a.count = a.err = 0;
    sluice_selector_blocking(s, wait_nogvl, &a);
    if (a.count < 0) errno = a.err;
    for (int i = 0; i < a.count; i++) ready[i] = (uint32_t)a.events[i].data.u64;
    return a.count;
}
#endif
