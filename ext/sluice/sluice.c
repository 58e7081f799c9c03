/*
 * Sluice::Native — module functions and the extension's entry point. What
 * every file shares (the globals of common.h) is common.c's: this file only
 * sets it up, so no file depends on the one that calls every init. It has no
 * header: Ruby finds Init_sluice_ext by name, and nothing else here is shared.
 *
 * ext/sluice/README.md maps the native surface: which file owns what, every
 * native class and method, who calls it from Ruby and why it is native.
 */
#include "common.h"

#include "init.h"

/*
 * Sluice::Native.error_descriptions -> [[code, name, description], ...]
 * librdkafka's own table; Ruby turns names into Symbols (:msg_size_too_large).
 */
static VALUE native_error_descriptions(VALUE self) {
    const struct rd_kafka_err_desc *descs;
    size_t cnt;
    rd_kafka_get_err_descs(&descs, &cnt);
    VALUE out = rb_ary_new_capa((long)cnt);
    for (size_t i = 0; i < cnt; i++) {
        if (!descs[i].name) continue;
        rb_ary_push(out, rb_ary_new_from_args(3, INT2FIX(descs[i].code), rb_str_new_cstr(descs[i].name),
                                              rb_str_new_cstr(descs[i].desc ? descs[i].desc : "")));
    }
    return out;
}

/* Sluice::Native.librdkafka_version -> "2.0.2" */
static VALUE native_librdkafka_version(VALUE self) { return rb_str_new_cstr(rd_kafka_version_str()); }

static VALUE lookup_error(const char *name) {
    VALUE errors = rb_const_get(sluice_mSluice, rb_intern("Errors"));
    return rb_const_get(errors, rb_intern(name));
}

/*
 * Every file's Init runs once, from here. The order: the resolver's fork
 * handler first (before any client can resolve); the modules and the error
 * classes (lib/sluice/errors.rb is required before the extension) that every
 * file raises; the names of DeliveryHandle's fields (delivery_handle.c);
 * then the class tree top-down, since a subclass needs its
 * parent: Client (and what every kind shares: the main queue, partition
 * counts, Admin), Producer with its transactions, Consumer with its queue.
 * The selector, the test hooks and the mock cluster depend on no class.
 */
void Init_sluice_ext(void) {
    sluice_track_pid();
    sluice_init_resolve();

    sluice_mSluice = rb_define_module("Sluice");
    sluice_mNative = rb_define_module_under(sluice_mSluice, "Native");

    sluice_eConfigurationInvalid = lookup_error("ConfigurationInvalidError");
    sluice_eMessageInvalid = lookup_error("MessageInvalidError");
    sluice_eProducerClosed = lookup_error("ProducerClosedError");
    sluice_eConsumerClosed = lookup_error("ConsumerClosedError");
    sluice_eForked = lookup_error("ForkedProcessError");
    rb_gc_register_mark_object(sluice_eConfigurationInvalid);
    rb_gc_register_mark_object(sluice_eMessageInvalid);
    rb_gc_register_mark_object(sluice_eProducerClosed);
    rb_gc_register_mark_object(sluice_eConsumerClosed);
    rb_gc_register_mark_object(sluice_eForked);

    rb_define_module_function(sluice_mNative, "error_descriptions", native_error_descriptions, 0);
    rb_define_module_function(sluice_mNative, "librdkafka_version", native_librdkafka_version, 0);

    sluice_init_delivery_handle();
    VALUE cClient = sluice_init_client();
    sluice_init_drain(cClient);
    sluice_init_admin(cClient);
    VALUE cProducer = sluice_init_produce(cClient);
    sluice_init_transactions(cProducer);
    VALUE cConsumer = sluice_init_consumer(cClient);
    sluice_init_consume(cConsumer);
    sluice_init_share_consumer();
    sluice_init_selector();
    sluice_init_test_hooks();
    sluice_init_mock_cluster();
}
