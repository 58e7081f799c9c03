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

static int watch(int epfd, int fd, uint32_t token) {
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = token};
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

int sluice_backend_open(selector_t *s) {
    s->set_fd = epoll_create1(EPOLL_CLOEXEC);
    if (s->set_fd < 0) return -1;
    if (fcntl(s->set_fd, F_SETFL, O_NONBLOCK) < 0 || watch(s->set_fd, s->wake_r, SELECTOR_WAKE_TOKEN) < 0) {
        int err = errno;
        sluice_backend_close(s);
        errno = err;
        return -1;
    }
    return 0;
}

void sluice_backend_close(selector_t *s) {
    if (s->set_fd >= 0) close(s->set_fd);
    s->set_fd = -1;
}

int sluice_backend_add(selector_t *s, int fd, uint32_t token) { return watch(s->set_fd, fd, token); }

int sluice_backend_remove(selector_t *s, int fd) { return epoll_ctl(s->set_fd, EPOLL_CTL_DEL, fd, NULL); }

struct wait_args {
    int epfd, timeout_ms, count, err;
    struct epoll_event events[SELECTOR_MAX_EVENTS];
};

static void *wait_nogvl(void *p) {
    struct wait_args *a = p;
    a->count = epoll_wait(a->epfd, a->events, SELECTOR_MAX_EVENTS, a->timeout_ms);
    a->err = errno;
    return NULL;
}

VALUE sluice_backend_wait(selector_t *s, int timeout_ms, int *woken) {
    struct wait_args a;
    a.epfd = s->set_fd;
    a.timeout_ms = timeout_ms;
    a.count = a.err = 0;
    sluice_selector_blocking(s, wait_nogvl, &a);
    if (a.count < 0 && a.err != EINTR) rb_syserr_fail(a.err, "epoll_wait");
    VALUE tokens = rb_ary_new_capa(a.count > 0 ? a.count : 0);
    for (int i = 0; i < a.count; i++) {
        uint64_t token = a.events[i].data.u64;
        if (token == SELECTOR_WAKE_TOKEN) *woken = 1;
        else rb_ary_push(tokens, LONG2FIX((long)token));
    }
    return tokens;
}
#endif
