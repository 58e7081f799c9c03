/*
 * Address resolution that fork(2) neither waits for nor catches half-way.
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
 * A fork must not wait for lookups either: one that waits for DNS stalls
 * (GVL held) every fork and shell-out of the parent exactly during a DNS
 * outage. So every client resolves through this callback, which counts its
 * lookups in flight, and a fork waits for nothing: the child handler reads the
 * count as fork copied it. A child forked with a lookup in flight ("caught")
 * never calls getaddrinfo again for its clients, nor do its own children,
 * which inherit the flag: it parses numeric addresses itself and resolves
 * names with getent(1), a fresh process with fresh locks, building the
 * addrinfo list itself.
 *
 * Other process-wide locks librdkafka's threads take are out of reach here
 * (OpenSSL's: TLS handshakes, and from librdkafka 2.13 every connect's random
 * seed), and so is a caught child's own Socket code: README says to close
 * clients before forking where children create their own.
 */
#include "resolve.h"

#include "init.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Read and written with the __atomic builtins: C11's atomic operators and macros
 * put temporaries on the stack, and under AddressSanitizer the redzones of a
 * frame live in a thread stuck in a lookup outlive the fork: the child's new
 * threads, on reused stacks ASan does not know, then trip over them. */
static int lookups_in_flight;
static int caught_by_fork; /* set in a child forked mid-lookup, inherited by its children */

/* Lists built here are freed here: their first node's canonical name is this tag. */
static char own_list_tag[] = "";

struct own_node {
    struct addrinfo info; /* first: the node's address is the allocation's */
    struct sockaddr_storage address;
};

static void own_list_free(struct addrinfo *list) {
    while (list) {
        struct addrinfo *next = list->ai_next;
        free(list);
        list = next;
    }
}

static void release(struct addrinfo *list) {
    if (list->ai_canonname == own_list_tag)
        own_list_free(list);
    else
        freeaddrinfo(list);
}

/* An address in network byte order, as inet_pton writes it. */
struct address {
    int family;
    unsigned char bytes[16];
};

static int parse_address(const char *text, struct address *out) {
    if (inet_pton(AF_INET, text, out->bytes) == 1) {
        out->family = AF_INET;
        return 1;
    }
    if (inet_pton(AF_INET6, text, out->bytes) == 1) {
        out->family = AF_INET6;
        return 1;
    }
    return 0;
}

static struct addrinfo *own_node_new(const struct address *address, unsigned short port, const struct addrinfo *hints) {
    struct own_node *node = calloc(1, sizeof(*node));
    if (!node) return NULL;
    node->info.ai_family = address->family;
    node->info.ai_socktype = hints ? hints->ai_socktype : 0;
    node->info.ai_protocol = hints ? hints->ai_protocol : 0;
    node->info.ai_addr = (struct sockaddr *)&node->address;
    if (address->family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&node->address;
        in->sin_family = AF_INET;
        in->sin_port = htons(port);
        memcpy(&in->sin_addr, address->bytes, sizeof(in->sin_addr));
        node->info.ai_addrlen = sizeof(*in);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&node->address;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        memcpy(&in6->sin6_addr, address->bytes, sizeof(in6->sin6_addr));
        node->info.ai_addrlen = sizeof(*in6);
    }
    return &node->info;
}

/* The list being built by a caught child's lookup. */
struct own_list {
    struct addrinfo *head, *tail;
    unsigned short port;
    const struct addrinfo *hints;
};

static int own_list_has(const struct own_list *list, const struct address *address) {
    for (struct addrinfo *node = list->head; node; node = node->ai_next) {
        const void *bytes = node->ai_family == AF_INET ? (const void *)&((struct sockaddr_in *)node->ai_addr)->sin_addr
                                                       : (const void *)&((struct sockaddr_in6 *)node->ai_addr)->sin6_addr;
        if (node->ai_family == address->family && memcmp(bytes, address->bytes, address->family == AF_INET ? 4 : 16) == 0)
            return 1;
    }
    return 0;
}

/* 0, or EAI_MEMORY. Addresses of another family than asked for are left out. */
static int own_list_add(struct own_list *list, const struct address *address) {
    int wanted = list->hints ? list->hints->ai_family : AF_UNSPEC;
    if ((wanted != AF_UNSPEC && wanted != address->family) || own_list_has(list, address)) return 0;
    struct addrinfo *node = own_node_new(address, list->port, list->hints);
    if (!node) return EAI_MEMORY;
    if (list->tail)
        list->tail->ai_next = node;
    else {
        node->ai_canonname = own_list_tag;
        list->head = node;
    }
    list->tail = node;
    return 0;
}

/* librdkafka passes the port as the service; a caught child has no services database. */
static int parse_port(const char *service, unsigned short *port) {
    if (!service || !*service) {
        *port = 0;
        return 1;
    }
    char *end;
    long value = strtol(service, &end, 10);
    if (*end || value < 0 || value > 65535) return 0;
    *port = (unsigned short)value;
    return 1;
}

/* One getent(1) output line: an address first, then the socket type and names. */
static int add_getent_line(struct own_list *list, char *line) {
    line[strcspn(line, " \t")] = '\0';
    struct address address;
    return parse_address(line, &address) ? own_list_add(list, &address) : 0;
}

static int add_getent_output(struct own_list *list, char *output) {
    for (char *line = output, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        int r = add_getent_line(list, line);
        if (r) return r;
    }
    return list->head ? 0 : EAI_NONAME;
}

static int resolve_out_of_process(const char *node, const char *service, const struct addrinfo *hints,
                                  struct addrinfo **res) {
    struct own_list list = {NULL, NULL, 0, hints};
    if (!node || !parse_port(service, &list.port)) return node ? EAI_SERVICE : EAI_NONAME;
    struct address address;
    int r;
    if (parse_address(node, &address)) {
        r = own_list_add(&list, &address);
        if (!r && !list.head) r = EAI_NONAME; /* an address of another family than asked for */
    } else if (hints && (hints->ai_flags & AI_NUMERICHOST)) {
        r = EAI_NONAME;
    } else {
        char *output = NULL;
        r = sluice_getent_hosts(node, hints ? hints->ai_family : AF_UNSPEC, &output);
        if (!r) r = add_getent_output(&list, output);
        free(output);
    }
    if (r)
        own_list_free(list.head);
    else
        *res = list.head;
    return r;
}

static int resolve_in_process(const char *node, const char *service, const struct addrinfo *hints,
                              struct addrinfo **res) {
    __atomic_add_fetch(&lookups_in_flight, 1, __ATOMIC_SEQ_CST);
    int r = getaddrinfo(node, service, hints, res);
    int saved = errno; /* EAI_SYSTEM leaves the cause in errno */
    __atomic_sub_fetch(&lookups_in_flight, 1, __ATOMIC_SEQ_CST);
    errno = saved;
    return r;
}

static int resolve_cb(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res,
                      void *opaque) {
    (void)opaque;
    if (!node && !service && !hints) { /* librdkafka hands back what we resolved */
        if (*res) release(*res);
        return 0;
    }
    if (__atomic_load_n(&caught_by_fork, __ATOMIC_SEQ_CST)) return resolve_out_of_process(node, service, hints, res);
    return resolve_in_process(node, service, hints, res);
}

void sluice_conf_set_resolver(rd_kafka_conf_t *conf) { rd_kafka_conf_set_resolve_cb(conf, resolve_cb); }

/* The count is the parent's at the instant of the fork: a lookup counted there
 * may hold glibc's locks, which the child inherits held. The fork waits for
 * nothing; the child only decides how it resolves from now on. Only Linux
 * takes the getent way (glibc and musl ship getent; macOS and the BSDs do not);
 * elsewhere a caught child goes on with getaddrinfo as before. */
static void after_fork_in_child(void) {
#ifdef __linux__
    if (__atomic_load_n(&lookups_in_flight, __ATOMIC_SEQ_CST) > 0)
        __atomic_store_n(&caught_by_fork, 1, __ATOMIC_SEQ_CST);
#endif
    __atomic_store_n(&lookups_in_flight, 0, __ATOMIC_SEQ_CST); /* the threads that counted them are gone */
}

void sluice_init_resolve(void) { pthread_atfork(NULL, NULL, after_fork_in_child); }
