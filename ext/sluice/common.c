/*
 * What every file shares (declared in common.h): the modules, the error
 * classes, the fork check, pipes and the clock. A leaf: it calls no other
 * file of the extension, so sharing these makes no file depend on another's
 * code (sluice.c only sets them up, in Init_sluice_ext).
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

VALUE sluice_mSluice;
VALUE sluice_mNative;
VALUE sluice_eConfigurationInvalid;
VALUE sluice_eMessageInvalid;
VALUE sluice_eProducerClosed;
VALUE sluice_eConsumerClosed;
VALUE sluice_eForked;

volatile pid_t sluice_current_pid;

static void atfork_child(void) { sluice_current_pid = getpid(); }

void sluice_track_pid(void) {
    sluice_current_pid = getpid();
    pthread_atfork(NULL, NULL, atfork_child);
}

int sluice_pipe(int fds[2]) {
#ifdef HAVE_PIPE2
    return pipe2(fds, O_NONBLOCK | O_CLOEXEC);
#else
    if (pipe(fds) < 0) return -1;
    for (int i = 0; i < 2; i++) {
        if (fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK) < 0 || fcntl(fds[i], F_SETFD, FD_CLOEXEC) < 0) {
            int err = errno;
            close(fds[0]);
            close(fds[1]);
            errno = err;
            return -1;
        }
    }
    return 0;
#endif
}

double sluice_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}
