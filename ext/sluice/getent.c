/*
 * Host lookups through getent(1), for a process forked while a lookup was in
 * flight (resolve.c): getaddrinfo there may block on a lock the fork caught
 * held, while getent runs in a fresh process with fresh libc locks.
 *
 * posix_spawn (glibc: clone(CLONE_VM | CLONE_VFORK), no atfork handlers, no
 * locks of ours) starts it; its output is read through a pipe with a deadline,
 * so an unreachable DNS server costs this broker thread GETENT_SECONDS at most.
 */
#include "resolve.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Longer than glibc's own give-up time with default resolv.conf options
 * (5 s x 2 attempts x each name server and search domain). */
#define GETENT_SECONDS 60
#define GETENT_OUTPUT_MAX (64 * 1024)

/* getent writes to a blocking end (stdio gives up on EAGAIN); this side polls. */
static int output_pipe(int fds[2]) {
    if (sluice_pipe(fds) != 0) return -1;
    if (fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) & ~O_NONBLOCK) == 0) return 0;
    int err = errno;
    close(fds[0]);
    close(fds[1]);
    errno = err;
    return -1;
}

static const char *database_for(int family) {
    if (family == AF_INET) return "ahostsv4";
    if (family == AF_INET6) return "ahostsv6";
    return "ahosts";
}

static int spawn_getent(const char *name, int family, int out_fd, pid_t *pid) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawn_file_actions_init(&actions);
    /* The pipe first: in a daemon that closed its stdin or stderr, the pipe may be fd 0 or 2. */
    posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    posix_spawnattr_init(&attributes);
    /* A broker thread blocks every signal, and Ruby's handlers are no getent's. */
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setsigdefault(&attributes, &all);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    char *argv[] = {"getent", (char *)database_for(family), (char *)name, NULL};
    int r = posix_spawnp(pid, "getent", &actions, &attributes, argv, environ);
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    return r;
}

/* Reads until end of file, a full buffer or the deadline: 1 when getent closed its output. */
static int read_output(int fd, char *buffer, size_t *length, double deadline) {
    while (*length < GETENT_OUTPUT_MAX - 1) {
        double left = deadline - sluice_now_ms();
        if (left <= 0) return 0;
        struct pollfd readable = {fd, POLLIN, 0};
        int ready = poll(&readable, 1, (int)left);
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) return 0;
        ssize_t got = read(fd, buffer + *length, GETENT_OUTPUT_MAX - 1 - *length);
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (got <= 0) return got == 0;
        *length += (size_t)got;
    }
    return 0;
}

/* getent's exit status, -1 when it was killed, or 0 when someone else reaped it
 * (a wait(-1) elsewhere in the process) after it closed its output. */
static int finish(pid_t pid, int finished) {
    if (!finished) kill(pid, SIGKILL);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return finished ? 0 : -1;
    }
    if (!finished || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

static int status_to_eai(int status) {
    if (status == 0) return 0;
    if (status == 2) return EAI_NONAME; /* getent: key not found */
    return EAI_AGAIN;                   /* killed at the deadline, or a failed lookup */
}

/* 0 with *output (malloc'ed, NUL-terminated: "address type names" lines), or an EAI_ error. */
int sluice_getent_hosts(const char *name, int family, char **output) {
    if (name[0] == '-') return EAI_NONAME; /* never an option to getent */
    char *buffer = malloc(GETENT_OUTPUT_MAX);
    if (!buffer) return EAI_MEMORY;
    int fds[2];
    if (output_pipe(fds) != 0) {
        free(buffer);
        return EAI_SYSTEM;
    }
    pid_t pid;
    int spawned = spawn_getent(name, family, fds[1], &pid);
    close(fds[1]);
    if (spawned != 0) {
        close(fds[0]);
        free(buffer);
        errno = spawned; /* ENOENT: no getent on PATH */
        return EAI_SYSTEM;
    }
    size_t length = 0;
    int finished = read_output(fds[0], buffer, &length, sluice_now_ms() + GETENT_SECONDS * 1000.0);
    close(fds[0]);
    buffer[length] = '\0';
    int r = status_to_eai(finish(pid, finished));
    if (r)
        free(buffer);
    else
        *output = buffer;
    return r;
}
