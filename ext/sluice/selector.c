/*
 * Sluice::Native::Selector — one epoll set over many producers' wake-up pipes.
 *
 * The poller thread waits here with the GVL released; any thread can interrupt
 * the wait through an eventfd (#wakeup). Registrations are epoll_ctl calls, so
 * no fd list is rebuilt per wait and a wait costs the same for 1 or 1,000
 * producers: only ready fds come back.
 *
 * The selector never reads the clients' pipes (each client empties its own
 * when it serves its queue) and does not own them: a pipe is removed from the
 * set before its owner closes it.
 */
#include "sluice.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define SELECTOR_MAX_EVENTS 512 /* per wait; level-triggered, so the rest come next wait */

typedef struct {
    int epfd;
    int wakefd;
    pid_t pid;
    long registered;
} selector_t;

static void selector_close_fds(selector_t *s) {
    if (s->epfd >= 0) close(s->epfd);
    if (s->wakefd >= 0) close(s->wakefd);
    s->epfd = s->wakefd = -1;
}

static void selector_free(void *p) {
    /* Closing our copies is safe in a forked child too: epoll_ctl would not be
     * (the epoll set is shared with the parent), close is. */
    selector_close_fds(p);
    xfree(p);
}

static size_t selector_memsize(const void *p) { return sizeof(selector_t); }

static const rb_data_type_t selector_type = {
    .wrap_struct_name = "Sluice::Native::Selector",
    .function = {.dfree = selector_free, .dsize = selector_memsize},
    .flags = RUBY_TYPED_FREE_IMMEDIATELY,
};

static VALUE selector_alloc(VALUE klass) {
    selector_t *s;
    VALUE self = TypedData_Make_Struct(klass, selector_t, &selector_type, s);
    s->epfd = s->wakefd = -1;
    s->pid = sluice_current_pid;
    return self;
}

static selector_t *selector_open(VALUE self) {
    selector_t *s;
    TypedData_Get_Struct(self, selector_t, &selector_type, s);
    if (sluice_forked(s->pid)) rb_raise(sluice_eForked, "selector inherited through fork");
    if (s->epfd < 0) rb_raise(rb_eIOError, "selector is closed");
    return s;
}

static VALUE selector_initialize(VALUE self) {
    selector_t *s;
    TypedData_Get_Struct(self, selector_t, &selector_type, s);
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (s->epfd < 0) rb_sys_fail("epoll_create1");
    s->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->wakefd < 0) {
        selector_close_fds(s);
        rb_sys_fail("eventfd");
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = UINT64_MAX};
    if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->wakefd, &ev) < 0) {
        selector_close_fds(s);
        rb_sys_fail("epoll_ctl");
    }
    return self;
}

/* #add(fd, token) — token is a non-negative Integer < 2**31 handed back by #wait. */
static VALUE selector_add(VALUE self, VALUE fd, VALUE token) {
    selector_t *s = selector_open(self);
    int ifd = NUM2INT(fd);
    long tok = NUM2LONG(token);
    if (tok < 0 || tok > INT32_MAX) rb_raise(rb_eRangeError, "token out of range");
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = ((uint64_t)tok << 32) | (uint32_t)ifd};
    if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, ifd, &ev) < 0) rb_sys_fail("epoll_ctl(ADD)");
    s->registered++;
    return token;
}

/* #remove(fd) */
static VALUE selector_remove(VALUE self, VALUE fd) {
    selector_t *s = selector_open(self);
    if (epoll_ctl(s->epfd, EPOLL_CTL_DEL, NUM2INT(fd), NULL) < 0) {
        if (errno != ENOENT && errno != EBADF) rb_sys_fail("epoll_ctl(DEL)");
        return Qfalse;
    }
    s->registered--;
    return Qtrue;
}

struct wait_args {
    selector_t *s;
    int timeout_ms;
    int count;
    int err;
    struct epoll_event events[SELECTOR_MAX_EVENTS];
};

static void *wait_nogvl(void *p) {
    struct wait_args *a = p;
    a->count = epoll_wait(a->s->epfd, a->events, SELECTOR_MAX_EVENTS, a->timeout_ms);
    a->err = errno;
    return NULL;
}

static void wait_ubf(void *p) {
    uint64_t one = 1;
    if (write(((struct wait_args *)p)->s->wakefd, &one, sizeof(one)) < 0) {
        /* EAGAIN: a wake-up is already pending */
    }
}

/*
 * #wait(timeout_ms) -> [token, ...] of the ready pipes (possibly empty)
 *
 * Releases the GVL while waiting; #wakeup or an interrupt ends the wait early.
 * Reads nothing from the clients' pipes: each client empties its own when it
 * serves its queue (Client#drain), so a wake-up is consumed only by the code
 * that acts on it. An interrupt is raised before anything is consumed; the
 * ready fds stay ready (level-triggered) for the next wait.
 */
static VALUE selector_wait(VALUE self, VALUE timeout) {
    selector_t *s = selector_open(self);
    struct wait_args args, *a = &args;
    a->s = s;
    a->timeout_ms = NUM2INT(timeout);
    a->count = 0;
    a->err = 0;
    rb_thread_call_without_gvl2(wait_nogvl, a, wait_ubf, a);
    rb_thread_check_ints();
    if (a->count < 0 && a->err != EINTR) {
        errno = a->err;
        rb_sys_fail("epoll_wait");
    }
    VALUE tokens = rb_ary_new_capa(a->count > 0 ? a->count : 0);
    for (int i = 0; i < a->count; i++) {
        uint64_t data = a->events[i].data.u64;
        if (data == UINT64_MAX) {
            uint64_t ignored;
            if (read(s->wakefd, &ignored, sizeof(ignored)) < 0) {
                /* EAGAIN: emptied already */
            }
        } else {
            rb_ary_push(tokens, LONG2FIX((long)(data >> 32)));
        }
    }
    return tokens;
}

/* #wakeup — ends a #wait in progress (or the next one) now. Thread-safe. */
static VALUE selector_wakeup(VALUE self) {
    selector_t *s = selector_open(self);
    uint64_t one = 1;
    if (write(s->wakefd, &one, sizeof(one)) < 0 && errno != EAGAIN) rb_sys_fail("write(eventfd)");
    return Qnil;
}

static VALUE selector_count(VALUE self) { return LONG2NUM(selector_open(self)->registered); }

static VALUE selector_close(VALUE self) {
    selector_t *s;
    TypedData_Get_Struct(self, selector_t, &selector_type, s);
    selector_close_fds(s);
    return Qnil;
}

void sluice_init_selector(void) {
    VALUE cSelector = rb_define_class_under(sluice_mNative, "Selector", rb_cObject);
    rb_define_alloc_func(cSelector, selector_alloc);
    rb_define_method(cSelector, "initialize", selector_initialize, 0);
    rb_define_method(cSelector, "add", selector_add, 2);
    rb_define_method(cSelector, "remove", selector_remove, 1);
    rb_define_method(cSelector, "wait", selector_wait, 1);
    rb_define_method(cSelector, "wakeup", selector_wakeup, 0);
    rb_define_method(cSelector, "count", selector_count, 0);
    rb_define_method(cSelector, "close", selector_close, 0);
}
