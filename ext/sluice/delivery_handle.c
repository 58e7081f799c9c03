/*
 * Sluice::DeliveryHandle's fields, written natively: the one place that knows
 * their names (lib/sluice/delivery/handle.rb reads them, and writes a failed
 * delivery itself in #resolve). Both writes are per message, on the hot path
 * of every produce: plain rb_ivar_set with interned names, nothing more.
 * A handle has three fields, which Ruby 3.1 keeps in the object itself (a
 * fourth name on any instance would give every handle after a table):
 * @topic, @partition (the notifier until delivery) and @offset (nil until
 * delivery). A message with a label is rare: Ruby's #initialize builds it.
 */
#include "delivery_handle.h"

#include "init.h"

static ID id_iv_topic, id_iv_partition, id_iv_offset;

VALUE sluice_handle_new(VALUE klass, VALUE topic, VALUE label, VALUE notifier) {
    if (!NIL_P(label)) return rb_class_new_instance(3, (VALUE[]){notifier, topic, label}, klass);
    VALUE handle = rb_obj_alloc(klass);
    rb_ivar_set(handle, id_iv_topic, topic);
    rb_ivar_set(handle, id_iv_partition, notifier); /* until delivery: who wakes the waiters */
    rb_ivar_set(handle, id_iv_offset, Qnil);
    return handle;
}

int sluice_handle_delivered(VALUE handle, int32_t partition, int64_t offset) {
    if (RB_OBJ_FROZEN(handle)) return 0;
    rb_ivar_set(handle, id_iv_partition, INT2FIX(partition));
    rb_ivar_set(handle, id_iv_offset, LL2NUM(offset)); /* last: the handle is no longer pending */
    return 1;
}

void sluice_init_delivery_handle(void) {
    id_iv_topic = rb_intern("@topic");
    id_iv_partition = rb_intern("@partition");
    id_iv_offset = rb_intern("@offset");
}
