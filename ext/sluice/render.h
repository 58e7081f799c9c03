/*
 * render.c: a fetched message as text, by an op list Ruby compiles
 * (lib/sluice/cli/message_format.rb). A leaf: it calls nothing of ours.
 */
#ifndef SLUICE_RENDER_H
#define SLUICE_RENDER_H

#include <librdkafka/rdkafka.h>
#include <ruby.h>

/* Raises ArgumentError unless ops is an Array of Strings and field numbers; returns a frozen copy. */
VALUE sluice_render_ops(VALUE ops);

/* Appends m as ops say to out (a binary String); a NULL key or value prints as null. */
void sluice_render(VALUE out, VALUE ops, VALUE null, const rd_kafka_message_t *m, const char *topic);

#endif
