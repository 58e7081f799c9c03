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


VALUE sluice_error_tuple(rd_kafka_error_t *error) {
    if (!error) return Qnil;
    VALUE out = rb_ary_new_from_args(5, INT2FIX(rd_kafka_error_code(error)), rb_str_new_cstr(rd_kafka_error_string(error)),
                                     rd_kafka_error_is_fatal(error) ? Qtrue : Qfalse,
                                     rd_kafka_error_is_retriable(error) ? Qtrue : Qfalse,
                                     rd_kafka_error_txn_requires_abort(error) ? Qtrue : Qfalse);
    rd_kafka_error_destroy(error);
    return out;
}
