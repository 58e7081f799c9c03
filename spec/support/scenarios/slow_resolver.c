/*
 * An LD_PRELOAD shim for spec/integration/fork/fork_dns_spec.rb: a resolver that
 * hangs on names ending in ".slow.invalid", as glibc's does when its DNS
 * server does not answer.
 *
 * Such a lookup takes SLOW_SECONDS and then fails; when it starts, the shim
 * writes a byte to the fd named by $SLOW_RESOLVER_FD, so a scenario knows a
 * lookup is in flight without guessing. Other names resolve as usual.
 *
 * A process forked while a slow lookup was in flight stands for the child that
 * glibc leaves with its resolver locks held: getaddrinfo there would hang for
 * good, so the shim says so on stderr and fails the lookup instead (a fresh
 * process, like getent started by the child, starts clean).
 *
 * In the process named by $SLOW_RESOLVER_HOLD_PID, other names wait (up to
 * HOLD_SECONDS) until a slow lookup has begun. Without that, a client with a
 * slow and a real bootstrap broker could hear from the real one first: its
 * metadata decommissions the bootstrap brokers, and the slow one's thread
 * then never looks its name up (CI, on a loaded machine: the scenario waited
 * for the announcement for good).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SLOW_SECONDS 120
#define HOLD_SECONDS 30

typedef int (*getaddrinfo_fn)(const char *, const char *, const struct addrinfo *, struct addrinfo **);

static atomic_int slow_in_flight;
static atomic_int slow_process; /* the pid whose threads run the slow lookups */

static int is_slow(const char *node) {
    static const char suffix[] = ".slow.invalid";
    size_t length = node ? strlen(node) : 0, suffix_length = sizeof(suffix) - 1;
    return length > suffix_length && strcmp(node + length - suffix_length, suffix) == 0;
}

static void announce(void) {
    const char *fd = getenv("SLOW_RESOLVER_FD");
    if (fd && write(atoi(fd), "s", 1) < 0) perror("slow_resolver: announce");
}

static void hang(void) {
    struct timespec left = {SLOW_SECONDS, 0};
    while (nanosleep(&left, &left) != 0 && errno == EINTR) {
    }
}

static int caught_by_fork(void) { return atomic_load(&slow_in_flight) > 0 && atomic_load(&slow_process) != getpid(); }

/* Other names in the holding process wait for its first slow lookup (see the top): slow_process names it then. */
static void hold_until_slow_begun(void) {
    const char *pid = getenv("SLOW_RESOLVER_HOLD_PID");
    if (!pid || atoi(pid) != (int)getpid()) return;
    struct timespec tick = {0, 1000000};
    for (int waited = 0; atomic_load(&slow_process) != getpid() && waited < HOLD_SECONDS * 1000; waited++) nanosleep(&tick, NULL);
}

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res) {
    if (caught_by_fork()) {
        fprintf(stderr, "slow_resolver: getaddrinfo(%s) in process %d, forked during a lookup: glibc could hang here\n",
                node ? node : "NULL", (int)getpid());
        return EAI_FAIL;
    }
    if (!is_slow(node)) {
        hold_until_slow_begun();
        return ((getaddrinfo_fn)dlsym(RTLD_NEXT, "getaddrinfo"))(node, service, hints, res);
    }
    atomic_store(&slow_process, getpid());
    atomic_fetch_add(&slow_in_flight, 1);
    announce();
    hang();
    atomic_fetch_sub(&slow_in_flight, 1);
    return EAI_AGAIN;
}
