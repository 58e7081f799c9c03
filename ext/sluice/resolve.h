/*
 * resolve.c: every client resolves broker names through it. It counts lookups
 * in flight: a fork waits for none, and a child forked mid-lookup (glibc's
 * resolver locks maybe held) resolves through getent(1) instead (getent.c).
 */
#ifndef SLUICE_RESOLVE_H
#define SLUICE_RESOLVE_H

#include "common.h"

/* Makes conf's handle resolve through resolve.c (client.c, for every client). */
void sluice_conf_set_resolver(rd_kafka_conf_t *conf);
/* getent.c: resolves name by running getent(1); 0 with *output (malloc'ed "address type names" lines), or an EAI_ error. */
int sluice_getent_hosts(const char *name, int family, char **output);

#endif
