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

/* An rd_kafka_error_t (destroyed) -> nil or [code, message, fatal, retriable, txn_requires_abort] */
VALUE sluice_error_tuple(rd_kafka_error_t *error);

#endif
