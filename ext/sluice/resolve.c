/*
 * Address resolution that fork(2) cannot catch half-way.
 *
 * librdkafka's broker threads resolve broker names with getaddrinfo(3) on
 * every (re)connect. glibc's getaddrinfo takes process-private locks (the
 * AI_ADDRCONFIG interface cache in check_pf.c, NSS state) that its fork does
 * not reset: a fork while a broker thread is inside getaddrinfo leaves them
 * held in the child forever, and the child's first lookup (a new client's
 * broker thread, or Ruby's own Socket code) blocks for good. That was the
 * "close after fork hangs" defect: the child's new consumer never connected,
 * and its rd_kafka_destroy waited for a broker thread stuck in __check_pf.
 *
 * So every client resolves through this callback, which holds a read lock
 * around getaddrinfo, and the pthread_atfork prepare handler takes the write
 * lock: a fork waits (bounded) for lookups in flight and none starts until it
 * is done. Lookups run concurrently with each other as before.
 *
 * Other process-wide locks librdkafka's threads take are out of reach here
 * (OpenSSL's: TLS handshakes, and from librdkafka 2.13 every connect's random
 * seed): README says to close clients before forking where children create
 * their own.
 */
#include "sluice.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

/* A lookup slow enough to hold a fork this long (DNS timeouts) lets the fork
 * go ahead unguarded rather than stall the application. */
#define FORK_WAIT_SECONDS 10

static pthread_rwlock_t resolve_lock = PTHREAD_RWLOCK_INITIALIZER;
static int fork_holds_lock; /* touched only by the forking thread */

static int resolve_cb(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res,
                      void *opaque) {
    (void)opaque;
    if (!node && !service && !hints) { /* librdkafka hands back what we resolved */
        if (*res) freeaddrinfo(*res);
        return 0;
    }
    int locked = pthread_rwlock_rdlock(&resolve_lock) == 0;
    int r = getaddrinfo(node, service, hints, res);
    int saved = errno; /* EAI_SYSTEM leaves the cause in errno */
    if (locked) pthread_rwlock_unlock(&resolve_lock);
    errno = saved;
    return r;
}

void sluice_conf_set_resolver(rd_kafka_conf_t *conf) { rd_kafka_conf_set_resolve_cb(conf, resolve_cb); }

/* trywrlock in a loop rather than pthread_rwlock_timedwrlock, which macOS lacks;
 * with no lookup in flight the first try succeeds. */
static void before_fork(void) {
    const struct timespec pause = {0, 1000 * 1000};
    for (int waited_ms = 0; waited_ms < FORK_WAIT_SECONDS * 1000; waited_ms++) {
        fork_holds_lock = pthread_rwlock_trywrlock(&resolve_lock) == 0;
        if (fork_holds_lock) return;
        nanosleep(&pause, NULL);
    }
}

static void after_fork_in_parent(void) {
    if (fork_holds_lock) pthread_rwlock_unlock(&resolve_lock);
    fork_holds_lock = 0;
}

/* The child's only thread owns the write lock under the parent's thread id,
 * which glibc's unlock would not recognise: start from a fresh lock instead. */
static void after_fork_in_child(void) {
    static const pthread_rwlock_t fresh = PTHREAD_RWLOCK_INITIALIZER;
    memcpy(&resolve_lock, &fresh, sizeof(resolve_lock));
    fork_holds_lock = 0;
}

void sluice_init_resolve(void) { pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child); }
