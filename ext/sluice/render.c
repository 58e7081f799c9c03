/*
 * A fetched message as text, appended to a String: sluice tail's output
 * without a Sluice::Message a message (issue 58: a Message built and then
 * formatted cost tail 3.5x kcat's CPU a line). The format is compiled in Ruby
 * (lib/sluice/cli/message_format.rb) into ops, which this file only walks:
 * a String is printed as it is, an Integer prints a field. What each field
 * prints is kcat's (and MessageFormat#render's, the Ruby path of the same
 * formats): sizes -1 for NULL, %R the value's size as a big-endian int32, no
 * timestamp as nothing.
 */
#include "render.h"

#include <stdio.h>
#include <string.h>

/* The field numbers: MessageFormat::NATIVE_FIELDS lists them in this order. */
enum { VALUE_BYTES, KEY_BYTES, VALUE_SIZE, KEY_SIZE, VALUE_SIZE_BINARY, TIMESTAMP, TOPIC, PARTITION, OFFSET, FIELD_COUNT };

VALUE sluice_render_ops(VALUE ops) {
    Check_Type(ops, T_ARRAY);
    VALUE copy = rb_ary_new_capa(RARRAY_LEN(ops));
    for (long i = 0; i < RARRAY_LEN(ops); i++) {
        VALUE op = RARRAY_AREF(ops, i);
        if (FIXNUM_P(op) && FIX2LONG(op) >= 0 && FIX2LONG(op) < FIELD_COUNT) rb_ary_push(copy, op);
        else if (RB_TYPE_P(op, T_STRING)) rb_ary_push(copy, rb_str_new_frozen(op));
        else rb_raise(rb_eArgError, "an op is a String or a field number (0 to %d), got %" PRIsVALUE, FIELD_COUNT - 1, op);
    }
    return rb_ary_freeze(copy);
}

static void bytes(VALUE out, const void *p, size_t len, VALUE null) {
    if (p) rb_str_buf_cat(out, p, (long)len);
    else rb_str_buf_append(out, null);
}

static void number(VALUE out, long long n) {
    char text[24];
    int len = snprintf(text, sizeof(text), "%lld", n);
    rb_str_buf_cat(out, text, len);
}

static void size_binary(VALUE out, const void *p, size_t len) {
    uint32_t size = p ? (uint32_t)len : UINT32_MAX; /* -1 as an int32 */
    char be[4] = {(char)(size >> 24), (char)(size >> 16), (char)(size >> 8), (char)size};
    rb_str_buf_cat(out, be, 4);
}

void sluice_render(VALUE out, VALUE ops, VALUE null, const rd_kafka_message_t *m, const char *topic) {
    for (long i = 0; i < RARRAY_LEN(ops); i++) {
        VALUE op = RARRAY_AREF(ops, i);
        if (!FIXNUM_P(op)) {
            rb_str_buf_append(out, op);
            continue;
        }
        switch (FIX2INT(op)) {
        case VALUE_BYTES: bytes(out, m->payload, m->len, null); break;
        case KEY_BYTES: bytes(out, m->key, m->key_len, null); break;
        case VALUE_SIZE: number(out, m->payload ? (long long)m->len : -1); break;
        case KEY_SIZE: number(out, m->key ? (long long)m->key_len : -1); break;
        case VALUE_SIZE_BINARY: size_binary(out, m->payload, m->len); break;
        case TIMESTAMP: {
            int64_t ts = rd_kafka_message_timestamp(m, NULL);
            if (ts >= 0) number(out, ts);
            break;
        }
        case TOPIC: rb_str_buf_cat(out, topic, (long)strlen(topic)); break;
        case PARTITION: number(out, m->partition); break;
        case OFFSET: number(out, m->offset); break;
        }
    }
}
