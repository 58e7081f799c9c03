/*
 * Sluice::Native::Selector — waits on many producers' wake-up pipes at once.
 *
 * The poller thread waits here with the GVL released; any thread can interrupt
 * the wait through the selector's own interrupt fd (#wakeup). The set of
 * watched fds lives in a backend chosen at compile time (selector.h):
 * Selector.backend says which one was built.
 *
 * The selector never reads the clients' pipes (each client empties its own
 * when it serves its queue) and does not own them: a pipe is removed from the
 * set before its owner closes it.
 */
#include "selector.h"

#include "init.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#ifdef SLUICE_WAKE_EVENTFD
#include <sys/eventfd.h>
#endif

/* ------------------------------------------------------------------ interrupt fd */

#ifdef SLUICE_WAKE_EVENTFD
static int wake_open(selector_t *s) {
    s->wake_r = s->wake_w = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return s->wake_r < 0 ? -1 : 0;
}

#else
static int wake_open(selector_t *s) {
    int fds[2];
    if (sluice_pipe(fds) < 0) return -1;
    s->wake_r = fds[0];
    s->wake_w = fds[1];
    return 0;
}
#endif

static void wake_close(selector_t *s) {
    if (s->wake_w != s->wake_r) close(s->wake_w);
    close(s->wake_r);
    s->wake_r = s->wake_w = -1;
}

static void wake_clear(selector_t *s) {
    char buf[256]; /* an eventfd reads 8 bytes; a pipe holds a byte per wake-up since the last wait */
    while (read(s->wake_r, buf, sizeof(buf)) > 0) {
    }
}

/* ------------------------------------------------------------------ lifecycle */

static void selector_release(selector_t *s) {
    if (s->wake_r < 0) return;
    sluice_backend_close(s); /* forked child: its copy only, never the parent's registrations */
    wake_close(s);
    xfree(s->entries);
    xfree(s->index_of);
    s->entries = NULL;
    s->index_of = NULL;
    s->count = s->capa = s->index_capa = 0;
}

static void selector_free(void *p) {
    selector_release(p);
    xfree(p);
}

static size_t selector_memsize(const void *p) {
    const selector_t *s = p;
    return sizeof(*s) + (size_t)s->capa * sizeof(selector_entry_t) + (size_t)s->index_capa * sizeof(int32_t);
}

static const rb_data_type_t selector_type = {
    .wrap_struct_name = "Sluice::Native::Selector",
    .function = {.dfree = selector_free, .dsize = selector_memsize},
    .flags = RUBY_TYPED_FREE_IMMEDIATELY,
};

static VALUE selector_alloc(VALUE klass) {
    selector_t *s;
    VALUE self = TypedData_Make_Struct(klass, selector_t, &selector_type, s);
    s->set_fd = s->wake_r = s->wake_w = -1;
    s->pid = sluice_current_pid;
    return self;
}

static selector_t *selector_get(VALUE self) {
    selector_t *s;
    TypedData_Get_Struct(self, selector_t, &selector_type, s);
    return s;
}

static selector_t *selector_open(VALUE self) {
    selector_t *s = selector_get(self);
    if (sluice_forked(s->pid)) rb_raise(sluice_eForked, "selector inherited through fork");
    if (s->wake_r < 0) rb_raise(rb_eIOError, "selector is closed");
    return s;
}

static VALUE selector_initialize(VALUE self) {
    selector_t *s = selector_get(self);
    if (s->wake_r >= 0) rb_raise(rb_eRuntimeError, "selector already initialized");
    if (wake_open(s) < 0) rb_sys_fail("selector interrupt fd");
    if (sluice_backend_open(s) < 0 || sluice_backend_add(s, s->wake_r, SELECTOR_WAKE_TOKEN) < 0) {
        int err = errno;
        sluice_backend_close(s);
        wake_close(s);
        rb_syserr_fail(err, sluice_selector_backend);
    }
    return self;
}

/* ------------------------------------------------------------------ registry */

/* Room for fd, so nothing can fail once the backend accepted it. */
static void registry_reserve(selector_t *s, int fd) {
    if (s->count == s->capa) {
        long capa = s->capa ? s->capa * 2 : 16;
        REALLOC_N(s->entries, selector_entry_t, capa);
        s->capa = capa;
    }
    if (fd >= s->index_capa) {
        long capa = s->index_capa ? s->index_capa : 64;
        while (capa <= fd) capa *= 2;
        REALLOC_N(s->index_of, int32_t, capa);
        for (long i = s->index_capa; i < capa; i++) s->index_of[i] = -1;
        s->index_capa = capa;
    }
}

/* Swaps the last entry into the hole: O(1). */
static void registry_delete(selector_t *s, long at) {
    s->index_of[s->entries[at].fd] = -1;
    if (at != --s->count) {
        s->entries[at] = s->entries[s->count];
        s->index_of[s->entries[at].fd] = (int32_t)at;
    }
}

/* #add(fd, token) — token is a non-negative Integer < 2**31 handed back by #wait. */
static VALUE selector_add(VALUE self, VALUE fd, VALUE token) {
    selector_t *s = selector_open(self);
    int ifd = NUM2INT(fd);
    long tok = NUM2LONG(token);
    if (tok < 0 || tok > INT32_MAX) rb_raise(rb_eRangeError, "token out of range");
    if (ifd < 0 || fcntl(ifd, F_GETFD) < 0) rb_syserr_fail(EBADF, "Selector#add");
    if (selector_find(s, ifd) >= 0) rb_syserr_fail(EEXIST, "Selector#add");
    registry_reserve(s, ifd);
    if (sluice_backend_add(s, ifd, (uint32_t)tok) < 0) rb_sys_fail("Selector#add");
    s->entries[s->count] = (selector_entry_t){ifd, (uint32_t)tok, 0};
    s->index_of[ifd] = (int32_t)s->count++;
    return token;
}

/* #remove(fd) -> true, or false when fd was not registered */
static VALUE selector_remove(VALUE self, VALUE fd) {
    selector_t *s = selector_open(self);
    int ifd = NUM2INT(fd);
    long at = selector_find(s, ifd);
    if (at < 0) return Qfalse;
    /* ENOENT, EBADF: closed before #remove, and the kernel set dropped it already */
    if (sluice_backend_remove(s, ifd) < 0 && errno != ENOENT && errno != EBADF) rb_sys_fail("Selector#remove");
    registry_delete(s, at);
    return Qtrue;
}

static VALUE selector_count(VALUE self) { return LONG2NUM(selector_open(self)->count); }

/* ------------------------------------------------------------------ waiting */

/* The backend's wait, as Ruby sees it: the ready fds' tokens in an Array, the
 * interrupt fd's reported in *woken instead; raises for a failed wait. */
static VALUE ready_tokens(selector_t *s, int timeout_ms, int *woken) {
    VALUE buffer;
    int room = (int)s->count + 1;
    uint32_t *ready = ALLOCV_N(uint32_t, buffer, room); /* GC-owned: nothing leaks if a raise follows */
    int n = sluice_backend_wait(s, timeout_ms, ready, room), err = errno;
    if (n < 0 && err != EINTR) rb_syserr_fail(err, sluice_selector_wait_call);
    VALUE tokens = rb_ary_new_capa(n > 0 ? n : 0);
    for (int i = 0; i < n; i++) {
        if (ready[i] == SELECTOR_WAKE_TOKEN) *woken = 1;
        else rb_ary_push(tokens, LONG2FIX((long)ready[i]));
    }
    ALLOCV_END(buffer);
    return tokens;
}

/*
 * #wait(timeout_ms) -> [token, ...] of the ready pipes (possibly empty)
 *
 * Releases the GVL while waiting; #wakeup or an interrupt ends the wait early.
 * Reads nothing from the clients' pipes: each client empties its own when it
 * serves its queue (Client#drain), so a wake-up is consumed only by the code
 * that acts on it. An interrupt is raised before anything is consumed (the
 * interrupt fd included); the ready fds stay ready (level-triggered) for the
 * next wait.
 */
static VALUE selector_wait(VALUE self, VALUE timeout) {
    selector_t *s = selector_open(self);
    int timeout_ms = NUM2INT(timeout), woken = 0;
    VALUE tokens = ready_tokens(s, timeout_ms, &woken);
    rb_thread_check_ints();
    if (woken && s->wake_r >= 0) wake_clear(s); /* closed by another thread meanwhile: nothing to clear */
    return tokens;
}

/* #wakeup — ends a #wait in progress (or the next one) now. Thread-safe. */
static VALUE selector_wakeup(VALUE self) {
    sluice_selector_signal(selector_open(self));
    return Qnil;
}

static VALUE selector_close(VALUE self) {
    selector_release(selector_get(self));
    return Qnil;
}

/* Selector.backend -> :epoll, :kqueue or :poll, as built */
static VALUE selector_s_backend(VALUE klass) { return ID2SYM(rb_intern(sluice_selector_backend)); }

void sluice_init_selector(void) {
    VALUE cSelector = rb_define_class_under(sluice_mNative, "Selector", rb_cObject);
    rb_define_alloc_func(cSelector, selector_alloc);
    rb_define_singleton_method(cSelector, "backend", selector_s_backend, 0);
    rb_define_method(cSelector, "initialize", selector_initialize, 0);
    rb_define_method(cSelector, "add", selector_add, 2);
    rb_define_method(cSelector, "remove", selector_remove, 1);
    rb_define_method(cSelector, "wait", selector_wait, 1);
    rb_define_method(cSelector, "wakeup", selector_wakeup, 0);
    rb_define_method(cSelector, "count", selector_count, 0);
    rb_define_method(cSelector, "close", selector_close, 0);
}
