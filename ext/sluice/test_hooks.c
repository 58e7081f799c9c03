/*
 * Sluice::Native::TestHooks — what only the specs call, kept off the clients
 * so no client carries a method meant for tests. Each hook takes the native
 * client it acts on (Producer#client / Consumer#native in the specs).
 */
#include "client.h"
#include "consumer.h"
#include "init.h"
#include "values.h"

#ifdef HAVE_LIBRDKAFKA_RDKAFKA_MOCK_H
#include <librdkafka/rdkafka_mock.h>
#endif

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

#ifdef HAVE_LIBRDKAFKA_RDKAFKA_MOCK_H
static rd_kafka_mock_cluster_t *mock_cluster_of(VALUE client) {
    rd_kafka_mock_cluster_t *mcluster = rd_kafka_handle_mock_cluster(sluice_client_open(client)->rk);
    if (!mcluster) rb_raise(rb_eArgError, "the client has no mock cluster (test.mock.num.brokers)");
    return mcluster;
}

/*
 * TestHooks.mock_bootstraps(client) -> "host:port,..." of the librdkafka mock
 * cluster the client made (test.mock.num.brokers), for other clients to join.
 */
static VALUE test_hooks_mock_bootstraps(VALUE mod, VALUE client) {
    return rb_str_new_cstr(rd_kafka_mock_cluster_bootstraps(mock_cluster_of(client)));
}

/*
 * TestHooks.mock_push_request_errors(client, api_key, [code, ...]) -> nil
 *
 * The client's mock cluster answers its next requests of api_key with these
 * errors, one each: for faults a real cluster gives only by chance (an
 * OffsetFetch that meets a moving coordinator).
 */
static VALUE test_hooks_mock_push_request_errors(VALUE mod, VALUE client, VALUE api_key, VALUE codes) {
    rd_kafka_mock_cluster_t *mcluster = mock_cluster_of(client);
    Check_Type(codes, T_ARRAY);
    long count = RARRAY_LEN(codes);
    rd_kafka_resp_err_t errors[64];
    if (count > 64) rb_raise(rb_eArgError, "at most 64 errors at once");
    for (long i = 0; i < count; i++) errors[i] = (rd_kafka_resp_err_t)NUM2INT(rb_ary_entry(codes, i));
    rd_kafka_mock_push_request_errors_array(mcluster, (int16_t)NUM2INT(api_key), (size_t)count, errors);
    return Qnil;
}

/*
 * TestHooks.mock_broker_push_request_errors(client, broker_id, api_key, [[code, rtt_ms], ...]) -> nil
 *
 * Broker broker_id of the client's mock cluster answers its next requests of
 * api_key with these errors (0: none), each after its delay: requests answered
 * late stay in flight together, as behind a leader that is stepping down.
 */
static VALUE test_hooks_mock_broker_push_request_errors(VALUE mod, VALUE client, VALUE broker_id, VALUE api_key, VALUE answers) {
    rd_kafka_mock_cluster_t *mcluster = mock_cluster_of(client);
    Check_Type(answers, T_ARRAY);
    for (long i = 0; i < RARRAY_LEN(answers); i++) {
        VALUE answer = rb_ary_entry(answers, i);
        Check_Type(answer, T_ARRAY);
        /* One at a time: the call takes its (error, rtt) pairs as varargs. */
        rd_kafka_mock_broker_push_request_error_rtts(mcluster, NUM2INT(broker_id), (int16_t)NUM2INT(api_key), 1,
                                                     (rd_kafka_resp_err_t)NUM2INT(rb_ary_entry(answer, 0)),
                                                     NUM2INT(rb_ary_entry(answer, 1)));
    }
    return Qnil;
}
#endif

void sluice_init_test_hooks(void) {
    VALUE hooks = rb_define_module_under(sluice_mNative, "TestHooks");
    rb_define_module_function(hooks, "fatal_error", test_hooks_fatal_error, 3);
    rb_define_module_function(hooks, "member_id", test_hooks_member_id, 1);
#ifdef HAVE_LIBRDKAFKA_RDKAFKA_MOCK_H
    rb_define_module_function(hooks, "mock_bootstraps", test_hooks_mock_bootstraps, 1);
    rb_define_module_function(hooks, "mock_push_request_errors", test_hooks_mock_push_request_errors, 3);
    rb_define_module_function(hooks, "mock_broker_push_request_errors", test_hooks_mock_broker_push_request_errors, 4);
#endif
}
