/*
 * values.c: Ruby values from C ones and back, where more than one file needs
 * the same conversion (each raises, as Ruby's own do, before anything native
 * is allocated).
 */
#ifndef SLUICE_VALUES_H
#define SLUICE_VALUES_H

#include "common.h"

/* The C string at ary[i], which must be a String without NUL bytes. */
const char *sluice_cstr_at(VALUE ary, long i);
VALUE sluice_str_or_nil(const char *s);
/* A copy of len bytes at p as a String, or nil for NULL (a message's key, payload or header value). */
VALUE sluice_bytes_or_nil(const void *p, size_t len);
/* A message's headers as a flat [name, value, name, value, ...] (nil without any): a consumer's and a share consumer's. */
VALUE sluice_headers_of(const rd_kafka_message_t *m);

/* An rd_kafka_error_t (destroyed) -> nil or [code, message, fatal, retriable, txn_requires_abort] */
VALUE sluice_error_tuple(rd_kafka_error_t *error);

#endif
