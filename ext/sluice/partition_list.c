/*
 * Topic-partition lists <-> Ruby arrays (partition_list.h).
 */
#include "partition_list.h"

#include "values.h"

/*
 * [[topic, partition], ...], [[topic, partition, offset], ...] or
 * [[topic, partition, offset, metadata], ...] (metadata: a String or nil, the
 * committed offset's metadata: Consumer::FinishedOffsets) -> a new list.
 * Checks every entry first: nothing native is allocated before that, so a bad
 * entry raises without leaking.
 */
rd_kafka_topic_partition_list_t *sluice_partitions_from(VALUE ary) {
    Check_Type(ary, T_ARRAY);
    long n = RARRAY_LEN(ary);
    for (long i = 0; i < n; i++) {
        VALUE e = rb_ary_entry(ary, i);
        Check_Type(e, T_ARRAY);
        if (RARRAY_LEN(e) < 2) rb_raise(rb_eArgError, "partitions are [topic, partition(, offset)]");
        sluice_cstr_at(e, 0);
        NUM2INT(rb_ary_entry(e, 1));
        if (RARRAY_LEN(e) > 2) NUM2LL(rb_ary_entry(e, 2));
        if (RARRAY_LEN(e) > 3 && !NIL_P(rb_ary_entry(e, 3))) Check_Type(rb_ary_entry(e, 3), T_STRING);
    }
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new((int)(n > 0 ? n : 1));
    for (long i = 0; i < n; i++) {
        VALUE e = rb_ary_entry(ary, i);
        rd_kafka_topic_partition_t *tp =
            rd_kafka_topic_partition_list_add(list, sluice_cstr_at(e, 0), NUM2INT(rb_ary_entry(e, 1)));
        if (RARRAY_LEN(e) > 2) tp->offset = NUM2LL(rb_ary_entry(e, 2));
        VALUE metadata = RARRAY_LEN(e) > 3 ? rb_ary_entry(e, 3) : Qnil;
        if (!NIL_P(metadata) && RSTRING_LEN(metadata) > 0) {
            /* the list owns it: rd_kafka_topic_partition_list_destroy frees it */
            tp->metadata = malloc((size_t)RSTRING_LEN(metadata));
            if (tp->metadata) {
                memcpy(tp->metadata, RSTRING_PTR(metadata), (size_t)RSTRING_LEN(metadata));
                tp->metadata_size = (size_t)RSTRING_LEN(metadata);
            }
        }
    }
    return list;
}

/* A list -> [[topic, partition, offset, error_code], ...] */
VALUE sluice_partitions_to_ary(const rd_kafka_topic_partition_list_t *list) {
    VALUE out = rb_ary_new_capa(list ? list->cnt : 0);
    for (int i = 0; list && i < list->cnt; i++) {
        const rd_kafka_topic_partition_t *tp = &list->elems[i];
        rb_ary_push(out, rb_ary_new_from_args(4, rb_str_new_cstr(tp->topic), INT2FIX(tp->partition), LL2NUM(tp->offset),
                                              INT2FIX(tp->err)));
    }
    return out;
}

/* A list (or NULL) -> [[topic, partition, offset, metadata or nil], ...] */
VALUE sluice_partitions_to_ary_with_metadata(const rd_kafka_topic_partition_list_t *list) {
    VALUE out = rb_ary_new_capa(list ? list->cnt : 0);
    for (int i = 0; list && i < list->cnt; i++) {
        const rd_kafka_topic_partition_t *tp = &list->elems[i];
        VALUE metadata = tp->metadata && tp->metadata_size > 0 ? rb_str_new(tp->metadata, (long)tp->metadata_size) : Qnil;
        rb_ary_push(out, rb_ary_new_from_args(4, rb_str_new_cstr(tp->topic), INT2FIX(tp->partition), LL2NUM(tp->offset), metadata));
    }
    return out;
}
