/*
 * Shared declarations of the sluice native driver.
 *
 * The extension is a thin driver: it owns librdkafka handles, queues, pipes and
 * the epoll selector, and runs the hot loops (produce, drain a queue, wait on
 * many fds). Policy — when to poll, lifecycles, instrumentation, error wording —
 * lives in Ruby (lib/sluice).
 */
#ifndef SLUICE_H
#define SLUICE_H

#include <ruby.h>
#include <ruby/thread.h>
#include <sys/types.h>
#include <stdint.h>
#include <librdkafka/rdkafka.h>

extern VALUE sluice_mSluice;
extern VALUE sluice_mNative;

/* Error classes, defined in Ruby (lib/sluice/errors.rb), looked up once. */
extern VALUE sluice_eConfigurationInvalid;
extern VALUE sluice_eMessageInvalid;
extern VALUE sluice_eProducerClosed;
extern VALUE sluice_eConsumerClosed;
extern VALUE sluice_eForked;

/*
 * The pid of this process, refreshed by a pthread_atfork child handler, so a
 * fork check is an integer compare instead of a getpid() syscall per call.
 * Every native struct records the pid that created it; in a forked child it
 * is "closed": never destroyed, never waited on.
 */
extern volatile pid_t sluice_current_pid;

static inline int sluice_forked(pid_t owner_pid) { return owner_pid != sluice_current_pid; }

/* A pipe whose ends are both non-blocking and close-on-exec (librdkafka must
 * never block writing a wake-up; a child exec'd by the application must not
 * inherit it). Returns -1 with errno set. */
int sluice_pipe(int fds[2]);

/* Every client resolves broker names through resolve.c, which counts lookups in
 * flight: a fork waits for none, and a child forked mid-lookup (glibc's resolver
 * locks maybe held) resolves through getent(1) instead (getent.c). */
void sluice_conf_set_resolver(rd_kafka_conf_t *conf);
void sluice_init_resolve(void);
int sluice_getent_hosts(const char *name, int family, char **output);

/* Monotonic clock in milliseconds (vDSO, no syscall). */
double sluice_now_ms(void);

void sluice_init_client(void);
void sluice_init_selector(void);
void sluice_init_test_hooks(void);

#endif
