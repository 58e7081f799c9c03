/*
 * The poll(2) backend: POSIX only, for systems without epoll or kqueue, and
 * what SLUICE_SELECTOR=poll builds on Linux so CI runs the portable code.
 *
 * Its fd list is selector.c's registry (O(1) add and remove). Each wait copies
 * it into a pollfd array with the GVL held and releases the GVL only around
 * poll(2); ready fds are mapped back to tokens through the registry, so an fd
 * removed during the wait is not reported. An fd added during a wait is not in
 * that wait's array: #add wakes the waiter, whose caller waits again with it.
 */
#include "selector.h"

#ifdef SLUICE_SELECTOR_POLL
#include <errno.h>
#include <poll.h>

const char sluice_selector_backend[] = "poll";
const char sluice_selector_wait_call[] = "poll";

int sluice_backend_open(selector_t *s) { return 0; }

void sluice_backend_close(selector_t *s) {}

/* (The interrupt fd needs nothing: it is every wait's first pollfd.) */
int sluice_backend_add(selector_t *s, int fd, uint32_t token) {
    if (s->waiting) sluice_selector_signal(s);
    return 0;
}

int sluice_backend_remove(selector_t *s, int fd) { return 0; }

struct wait_args {
    struct pollfd *fds;
    nfds_t n;
    int timeout_ms, count, err;
};

static void *wait_nogvl(void *p) {
    struct wait_args *a = p;
    a->count = poll(a->fds, a->n, a->timeout_ms);
    a->err = errno;
    return NULL;
}

/* A ready fd's token, or -1; one found closed (POLLNVAL) is never polled again. */
static int64_t ready_token(selector_t *s, const struct pollfd *pfd) {
    long at = selector_find(s, pfd->fd);
    if (at < 0) return -1; /* removed during the wait */
    if (pfd->revents & POLLNVAL) {
        s->entries[at].closed = 1;
        return -1;
    }
    return s->entries[at].token;
}

int sluice_backend_wait(selector_t *s, int timeout_ms, uint32_t *ready, int room) {
    VALUE buffer;
    long n = s->count + 1;
    struct pollfd *fds = ALLOCV_N(struct pollfd, buffer, n); /* GC-owned: nothing leaks if a raise follows */
    fds[0] = (struct pollfd){.fd = s->wake_r, .events = POLLIN};
    for (long i = 1; i < n; i++) {
        const selector_entry_t *e = &s->entries[i - 1];
        fds[i] = (struct pollfd){.fd = e->closed ? -1 : e->fd, .events = POLLIN}; /* poll skips negative fds */
    }
    struct wait_args a = {fds, (nfds_t)n, timeout_ms, 0, 0};
    sluice_selector_blocking(s, wait_nogvl, &a);
    int count = 0;
    if (a.count > 0 && fds[0].revents) ready[count++] = SELECTOR_WAKE_TOKEN;
    for (long i = 1; a.count > 0 && i < n && count < room; i++) {
        int64_t token = fds[i].revents ? ready_token(s, &fds[i]) : -1;
        if (token >= 0) ready[count++] = (uint32_t)token;
    }
    ALLOCV_END(buffer);
    if (a.count < 0) errno = a.err;
    return a.count < 0 ? -1 : count;
}
#endif
