/*
 * Sluice::Native::TestHooks — what only the specs call, kept off the clients
 * so no client carries a method meant for tests. Each hook takes the native
 * client it acts on (Producer#client / Consumer#native in the specs).
 */
#include "client.h"
#include "consumer.h"
#include "init.h"
#include "values.h"

/*
 * TestHooks.fatal_error(client, code, reason) -> librdkafka's result code
 *
 * Raises a fatal error in the client, as librdkafka does when idempotence
 * breaks (rd_kafka_test_fatal_error, meant for tests): a real broker does not
 * fail that way on demand, and the specs of the producer's reload need it.
 */
static VALUE test_hooks_fatal_error(VALUE mod, VALUE client, VALUE code, VALUE reason) {
    client_t *c = sluice_client_open(client);
    return INT2FIX(rd_kafka_test_fatal_error(c->rk, (rd_kafka_resp_err_t)NUM2INT(code), StringValueCStr(reason)));
}

/*
 * TestHooks.member_id(consumer) -> the group member id librdkafka was given
 * (nil before joining): how a spec tells that a consumer stayed in its group
 * rather than rejoining under a new id.
 */
static VALUE test_hooks_member_id(VALUE mod, VALUE consumer) {
    char *id = rd_kafka_memberid(sluice_consumer_open(consumer)->rk);
    VALUE out = sluice_str_or_nil(id);
    if (id) rd_kafka_mem_free(NULL, id);
    return out;
}

void sluice_init_test_hooks(void) {
    VALUE hooks = rb_define_module_under(sluice_mNative, "TestHooks");
    rb_define_module_function(hooks, "fatal_error", test_hooks_fatal_error, 3);
    rb_define_module_function(hooks, "member_id", test_hooks_member_id, 1);
}
