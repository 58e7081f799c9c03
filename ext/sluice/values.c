/*
 * Ruby values from C ones and back, shared by the client files (values.h).
 */
#include "values.h"

const char *sluice_cstr_at(VALUE ary, long i) {
    VALUE v = rb_ary_entry(ary, i);
    Check_Type(v, T_STRING);
    return StringValueCStr(v);
}

VALUE sluice_str_or_nil(const char *s) { return s ? rb_str_new_cstr(s) : Qnil; }

VALUE sluice_bytes_or_nil(const void *p, size_t len) { return p ? rb_str_new(p, (long)len) : Qnil; }

VALUE sluice_headers_of(const rd_kafka_message_t *m) {
    rd_kafka_headers_t *hdrs = NULL;
    if (rd_kafka_message_headers(m, &hdrs) || !hdrs) return Qnil;
    size_t count = rd_kafka_header_cnt(hdrs);
    VALUE out = rb_ary_new_capa((long)count * 2);
    const char *name;
    const void *value;
    size_t size;
    for (size_t i = 0; !rd_kafka_header_get_all(hdrs, i, &name, &value, &size); i++) {
        rb_ary_push(out, rb_str_new_cstr(name));
        rb_ary_push(out, sluice_bytes_or_nil(value, size));
    }
    return out;
}


VALUE sluice_error_tuple(rd_kafka_error_t *error) {
    if (!error) return Qnil;
    VALUE out = rb_ary_new_from_args(5, INT2FIX(rd_kafka_error_code(error)), rb_str_new_cstr(rd_kafka_error_string(error)),
                                     rd_kafka_error_is_fatal(error) ? Qtrue : Qfalse,
                                     rd_kafka_error_is_retriable(error) ? Qtrue : Qfalse,
                                     rd_kafka_error_txn_requires_abort(error) ? Qtrue : Qfalse);
    rd_kafka_error_destroy(error);
    return out;
}
