/*
 * What every file of the sluice native driver shares (common.c defines it,
 * the inline fork check included; Init_sluice_ext, in sluice.c, sets it up):
 * Ruby, librdkafka, the Sluice and Sluice::Native modules, the error classes,
 * the fork check, pipes and the clock. Each other concern has a header of its own (README.md).
 *
 * The extension is a thin driver: it owns librdkafka handles, queues, pipes and
 * the selector, and runs the hot loops (produce, drain a queue, wait on many
 * fds). Policy — when to poll, lifecycles, instrumentation, error wording —
 * lives in Ruby (lib/sluice).
 */
#ifndef SLUICE_COMMON_H
#define SLUICE_COMMON_H

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

/* Sets it, and the atfork handler that keeps it current (Init_sluice_ext, once). */
void sluice_track_pid(void);

static inline int sluice_forked(pid_t owner_pid) { return owner_pid != sluice_current_pid; }

/* A pipe whose ends are both non-blocking and close-on-exec (librdkafka must
 * never block writing a wake-up; a child exec'd by the application must not
 * inherit it). Returns -1 with errno set. */
int sluice_pipe(int fds[2]);

/* Monotonic clock in milliseconds (vDSO, no syscall). */
double sluice_now_ms(void);

#endif
