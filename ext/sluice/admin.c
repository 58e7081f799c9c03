/*
 * Sluice::Native::Admin — librdkafka's admin API on a client's main queue.
 *
 * Every request is sent with the handle's main queue as its reply queue and a
 * request number as its opaque: the result arrives like any other main-queue
 * event, so the poller (:fd) or the client's polling thread (:thread) serves
 * it, and #drain hands it to Ruby as plain data (admin_result, the admin's
 * client_kind_t.result) with
 * that number. No queue, pipe or thread exists per request; what a request
 * allocates (topic specs, config resources, admin options) is released before
 * the send method returns: librdkafka copies it.
 *
 * What librdkafka 2.0.2 has no request for (topic and cluster descriptions,
 * watermarks, offsets by time) comes from the handle's blocking calls, run
 * through the client's gate (GVL released, interruptible), on every version.
 * IncrementalAlterConfigs (2.2) is used where the headers have it; Ruby
 * falls back to AlterConfigs of the whole dynamic set otherwise.
 *
 * Sluice::Native::Client#partition_count (metadata) lives here too.
 */

#include "client.h"
#include "gate.h"
#include "init.h"
#include "partition_list.h"
#include "values.h"

struct metadata_args {
    client_t *c;
    const char *topic;
    int timeout_ms;
    rd_kafka_resp_err_t err;
    int count;
};

/* The topic reference lives only inside the call: nothing of the handle outlives the gate. */
static void *metadata_nogvl(void *p) {
    struct metadata_args *a = p;
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(a->c->rk, a->topic, NULL);
    if (!rkt) {
        a->err = rd_kafka_last_error();
        return NULL;
    }
    a->err = rd_kafka_metadata(a->c->rk, 0, rkt, &md, a->timeout_ms);
    if (!a->err && md) {
        if (md->topic_cnt == 1 && md->topics[0].err) a->err = md->topics[0].err;
        else if (md->topic_cnt == 1) a->count = md->topics[0].partition_cnt;
    }
    if (md) rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
    return NULL;
}

/* #partition_count(topic, timeout_ms) -> [error_code, count] (GVL released) */
static VALUE client_partition_count(VALUE self, VALUE topic, VALUE timeout) {
    client_t *c = sluice_client_open(self);
    struct metadata_args a = {c, StringValueCStr(topic), NUM2INT(timeout), RD_KAFKA_RESP_ERR__TIMED_OUT, 0};
    sluice_gate_enter(c, metadata_nogvl, &a, NULL, NULL, NULL);
    sluice_gate_leave(c);
    return rb_ary_new_from_args(2, INT2FIX(a.err), INT2FIX(a.count));
}

/* ---- requests: sent with the GVL held (librdkafka only enqueues them) ---- */

/* The request number and timeout are converted here, first: nothing native is allocated before. */
static void check_request(VALUE id, VALUE timeout) {
    NUM2ULONG(id);
    NUM2INT(timeout);
}

/* Options naming the request (its opaque) and bounding it; the caller destroys them after the send. */
static rd_kafka_AdminOptions_t *options_for(client_t *c, rd_kafka_admin_op_t op, VALUE id, VALUE timeout) {
    rd_kafka_AdminOptions_t *opts = rd_kafka_AdminOptions_new(c->rk, op);
    int ms = NUM2INT(timeout);
    rd_kafka_AdminOptions_set_opaque(opts, (void *)(uintptr_t)NUM2ULONG(id));
    rd_kafka_AdminOptions_set_request_timeout(opts, ms, NULL, 0);
    /* refused (and ignored) by the requests that have no broker-side operation */
    rd_kafka_AdminOptions_set_operation_timeout(opts, ms, NULL, 0);
    return opts;
}

/* [[String, String], ...], checked before anything native is allocated. */
static void check_pairs(VALUE pairs) {
    if (NIL_P(pairs)) return;
    Check_Type(pairs, T_ARRAY);
    for (long i = 0; i < RARRAY_LEN(pairs); i++) {
        VALUE pair = RARRAY_AREF(pairs, i);
        Check_Type(pair, T_ARRAY);
        sluice_cstr_at(pair, 0);
        sluice_cstr_at(pair, 1);
    }
}

/* #create_topic(id, timeout_ms, name, partitions, replication_factor, [[config, value], ...]) -> nil or [code, message] */
static VALUE admin_create_topic(VALUE self, VALUE id, VALUE timeout, VALUE name, VALUE partitions, VALUE replication,
                                VALUE configs) {
    client_t *c = sluice_client_open(self);
    check_request(id, timeout);
    const char *topic = StringValueCStr(name);
    int count = NUM2INT(partitions), factor = NUM2INT(replication);
    check_pairs(configs);
    char errstr[512];
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, count, factor, errstr, sizeof(errstr));
    if (!nt) return rb_ary_new_from_args(2, INT2FIX(RD_KAFKA_RESP_ERR__INVALID_ARG), rb_str_new_cstr(errstr));
    for (long i = 0; !NIL_P(configs) && i < RARRAY_LEN(configs); i++)
        rd_kafka_NewTopic_set_config(nt, sluice_cstr_at(RARRAY_AREF(configs, i), 0), sluice_cstr_at(RARRAY_AREF(configs, i), 1));
    rd_kafka_AdminOptions_t *opts = options_for(c, RD_KAFKA_ADMIN_OP_CREATETOPICS, id, timeout);
    rd_kafka_CreateTopics(c->rk, &nt, 1, opts, c->queue);
    rd_kafka_AdminOptions_destroy(opts);
    rd_kafka_NewTopic_destroy(nt);
    return Qnil;
}

/* #delete_topic(id, timeout_ms, name) */
static VALUE admin_delete_topic(VALUE self, VALUE id, VALUE timeout, VALUE name) {
    client_t *c = sluice_client_open(self);
    check_request(id, timeout);
    const char *topic = StringValueCStr(name);
    rd_kafka_AdminOptions_t *opts = options_for(c, RD_KAFKA_ADMIN_OP_DELETETOPICS, id, timeout);
    rd_kafka_DeleteTopic_t *dt = rd_kafka_DeleteTopic_new(topic);
    rd_kafka_DeleteTopics(c->rk, &dt, 1, opts, c->queue);
    rd_kafka_DeleteTopic_destroy(dt);
    rd_kafka_AdminOptions_destroy(opts);
    return Qnil;
}

/* #create_partitions(id, timeout_ms, name, total) -> nil or [code, message] */
static VALUE admin_create_partitions(VALUE self, VALUE id, VALUE timeout, VALUE name, VALUE total) {
    client_t *c = sluice_client_open(self);
    check_request(id, timeout);
    const char *topic = StringValueCStr(name);
    size_t count = NUM2SIZET(total);
    char errstr[512];
    rd_kafka_NewPartitions_t *np = rd_kafka_NewPartitions_new(topic, count, errstr, sizeof(errstr));
    if (!np) return rb_ary_new_from_args(2, INT2FIX(RD_KAFKA_RESP_ERR__INVALID_ARG), rb_str_new_cstr(errstr));
    rd_kafka_AdminOptions_t *opts = options_for(c, RD_KAFKA_ADMIN_OP_CREATEPARTITIONS, id, timeout);
    rd_kafka_CreatePartitions(c->rk, &np, 1, opts, c->queue);
    rd_kafka_AdminOptions_destroy(opts);
    rd_kafka_NewPartitions_destroy(np);
    return Qnil;
}

/* #describe_configs(id, timeout_ms, resource_type, name) — resource_type: 2 topic, 4 broker */
static VALUE admin_describe_configs(VALUE self, VALUE id, VALUE timeout, VALUE type, VALUE name) {
    client_t *c = sluice_client_open(self);
    check_request(id, timeout);
    const char *resource = StringValueCStr(name);
    int restype = NUM2INT(type);
    rd_kafka_AdminOptions_t *opts = options_for(c, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS, id, timeout);
    rd_kafka_ConfigResource_t *res = rd_kafka_ConfigResource_new((rd_kafka_ResourceType_t)restype, resource);
    rd_kafka_DescribeConfigs(c->rk, &res, 1, opts, c->queue);
    rd_kafka_ConfigResource_destroy(res);
    rd_kafka_AdminOptions_destroy(opts);
    return Qnil;
}

/* #alter_configs(id, timeout_ms, resource_type, name, [[config, value], ...]) — replaces every dynamic setting */
static VALUE admin_alter_configs(VALUE self, VALUE id, VALUE timeout, VALUE type, VALUE name, VALUE configs) {
    client_t *c = sluice_client_open(self);
    check_request(id, timeout);
    const char *resource = StringValueCStr(name);
    int restype = NUM2INT(type);
    check_pairs(configs);
    rd_kafka_AdminOptions_t *opts = options_for(c, RD_KAFKA_ADMIN_OP_ALTERCONFIGS, id, timeout);
    rd_kafka_ConfigResource_t *res = rd_kafka_ConfigResource_new((rd_kafka_ResourceType_t)restype, resource);
    for (long i = 0; !NIL_P(configs) && i < RARRAY_LEN(configs); i++)
        rd_kafka_ConfigResource_set_config(res, sluice_cstr_at(RARRAY_AREF(configs, i), 0), sluice_cstr_at(RARRAY_AREF(configs, i), 1));
    rd_kafka_AlterConfigs(c->rk, &res, 1, opts, c->queue);
    rd_kafka_ConfigResource_destroy(res);
    rd_kafka_AdminOptions_destroy(opts);
    return Qnil;
}

#ifdef RD_KAFKA_EVENT_INCREMENTALALTERCONFIGS_RESULT /* librdkafka >= 2.2 */
/*
 * #incremental_alter_configs(id, timeout_ms, resource_type, name, [[config, value], ...], [config, ...])
 *   -> nil or [code, message]. Sets and deletes only the settings named. (Defined only when the
 *   librdkafka built against has IncrementalAlterConfigs; Ruby falls back to #alter_configs.)
 */
static VALUE admin_incremental_alter_configs(VALUE self, VALUE id, VALUE timeout, VALUE type, VALUE name, VALUE set, VALUE del) {
    client_t *c = sluice_client_open(self);
    check_request(id, timeout);
    const char *resource = StringValueCStr(name);
    int restype = NUM2INT(type);
    check_pairs(set);
    Check_Type(del, T_ARRAY);
    for (long i = 0; i < RARRAY_LEN(del); i++) sluice_cstr_at(del, i);
    rd_kafka_ConfigResource_t *res = rd_kafka_ConfigResource_new((rd_kafka_ResourceType_t)restype, resource);
    rd_kafka_error_t *error = NULL;
    for (long i = 0; !error && i < RARRAY_LEN(set); i++)
        error = rd_kafka_ConfigResource_add_incremental_config(res, sluice_cstr_at(RARRAY_AREF(set, i), 0), RD_KAFKA_ALTER_CONFIG_OP_TYPE_SET,
                                                                sluice_cstr_at(RARRAY_AREF(set, i), 1));
    for (long i = 0; !error && i < RARRAY_LEN(del); i++)
        error = rd_kafka_ConfigResource_add_incremental_config(res, sluice_cstr_at(del, i), RD_KAFKA_ALTER_CONFIG_OP_TYPE_DELETE, NULL);
    if (error) {
        rd_kafka_ConfigResource_destroy(res);
        VALUE refused = rb_ary_new_from_args(2, INT2FIX(rd_kafka_error_code(error)), sluice_str_or_nil(rd_kafka_error_string(error)));
        rd_kafka_error_destroy(error);
        return refused;
    }
    rd_kafka_AdminOptions_t *opts = options_for(c, RD_KAFKA_ADMIN_OP_INCREMENTALALTERCONFIGS, id, timeout);
    rd_kafka_IncrementalAlterConfigs(c->rk, &res, 1, opts, c->queue);
    rd_kafka_ConfigResource_destroy(res);
    rd_kafka_AdminOptions_destroy(opts);
    return Qnil;
}
#endif

/* #list_groups(id, timeout_ms) */
static VALUE admin_list_groups(VALUE self, VALUE id, VALUE timeout) {
    client_t *c = sluice_client_open(self);
    check_request(id, timeout);
    rd_kafka_AdminOptions_t *opts = options_for(c, RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPS, id, timeout);
    rd_kafka_ListConsumerGroups(c->rk, opts, c->queue);
    rd_kafka_AdminOptions_destroy(opts);
    return Qnil;
}

/* #describe_group(id, timeout_ms, group) */
static VALUE admin_describe_group(VALUE self, VALUE id, VALUE timeout, VALUE group) {
    client_t *c = sluice_client_open(self);
    check_request(id, timeout);
    const char *name = StringValueCStr(group);
    rd_kafka_AdminOptions_t *opts = options_for(c, RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS, id, timeout);
    rd_kafka_DescribeConsumerGroups(c->rk, &name, 1, opts, c->queue);
    rd_kafka_AdminOptions_destroy(opts);
    return Qnil;
}

/* #delete_group(id, timeout_ms, group) */
static VALUE admin_delete_group(VALUE self, VALUE id, VALUE timeout, VALUE group) {
    client_t *c = sluice_client_open(self);
    check_request(id, timeout);
    const char *name = StringValueCStr(group);
    rd_kafka_AdminOptions_t *opts = options_for(c, RD_KAFKA_ADMIN_OP_DELETEGROUPS, id, timeout);
    rd_kafka_DeleteGroup_t *dg = rd_kafka_DeleteGroup_new(name);
    rd_kafka_DeleteGroups(c->rk, &dg, 1, opts, c->queue);
    rd_kafka_DeleteGroup_destroy(dg);
    rd_kafka_AdminOptions_destroy(opts);
    return Qnil;
}

/* #list_group_offsets(id, timeout_ms, group) — every partition the group committed */
static VALUE admin_list_group_offsets(VALUE self, VALUE id, VALUE timeout, VALUE group) {
    client_t *c = sluice_client_open(self);
    check_request(id, timeout);
    const char *name = StringValueCStr(group);
    rd_kafka_AdminOptions_t *opts = options_for(c, RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPOFFSETS, id, timeout);
    rd_kafka_ListConsumerGroupOffsets_t *req = rd_kafka_ListConsumerGroupOffsets_new(name, NULL);
    rd_kafka_ListConsumerGroupOffsets(c->rk, &req, 1, opts, c->queue);
    rd_kafka_ListConsumerGroupOffsets_destroy(req);
    rd_kafka_AdminOptions_destroy(opts);
    return Qnil;
}

/* #alter_group_offsets(id, timeout_ms, group, [[topic, partition, offset], ...]) */
static VALUE admin_alter_group_offsets(VALUE self, VALUE id, VALUE timeout, VALUE group, VALUE offsets) {
    client_t *c = sluice_client_open(self);
    check_request(id, timeout);
    const char *name = StringValueCStr(group);
    rd_kafka_topic_partition_list_t *list = sluice_partitions_from(offsets); /* raises before it allocates */
    rd_kafka_AdminOptions_t *opts = options_for(c, RD_KAFKA_ADMIN_OP_ALTERCONSUMERGROUPOFFSETS, id, timeout);
    rd_kafka_AlterConsumerGroupOffsets_t *req = rd_kafka_AlterConsumerGroupOffsets_new(name, list);
    rd_kafka_AlterConsumerGroupOffsets(c->rk, &req, 1, opts, c->queue);
    rd_kafka_AlterConsumerGroupOffsets_destroy(req);
    rd_kafka_AdminOptions_destroy(opts);
    rd_kafka_topic_partition_list_destroy(list);
    return Qnil;
}

/* ---- results: main-queue events turned into plain data by #drain ---- */

static VALUE error_pair(const rd_kafka_error_t *error) {
    if (!error) return rb_ary_new_from_args(2, INT2FIX(0), Qnil);
    return rb_ary_new_from_args(2, INT2FIX(rd_kafka_error_code(error)), sluice_str_or_nil(rd_kafka_error_string(error)));
}

/* [[name, code, message], ...] */
static VALUE topic_results(const rd_kafka_topic_result_t **results, size_t cnt) {
    VALUE out = rb_ary_new_capa((long)cnt);
    for (size_t i = 0; i < cnt; i++)
        rb_ary_push(out, rb_ary_new_from_args(3, rb_str_new_cstr(rd_kafka_topic_result_name(results[i])),
                                              INT2FIX(rd_kafka_topic_result_error(results[i])),
                                              sluice_str_or_nil(rd_kafka_topic_result_error_string(results[i]))));
    return out;
}

/* [[config, value, source, read_only, default, sensitive], ...] */
static VALUE config_entries(const rd_kafka_ConfigResource_t *res) {
    size_t cnt = 0;
    const rd_kafka_ConfigEntry_t **entries = rd_kafka_ConfigResource_configs(res, &cnt);
    VALUE out = rb_ary_new_capa((long)cnt);
    for (size_t i = 0; i < cnt; i++) {
        const rd_kafka_ConfigEntry_t *e = entries[i];
        VALUE v[6] = {rb_str_new_cstr(rd_kafka_ConfigEntry_name(e)), sluice_str_or_nil(rd_kafka_ConfigEntry_value(e)),
                      INT2FIX(rd_kafka_ConfigEntry_source(e)), rd_kafka_ConfigEntry_is_read_only(e) ? Qtrue : Qfalse,
                      rd_kafka_ConfigEntry_is_default(e) ? Qtrue : Qfalse, rd_kafka_ConfigEntry_is_sensitive(e) ? Qtrue : Qfalse};
        rb_ary_push(out, rb_ary_new_from_values(6, v));
    }
    return out;
}

/* [[name, code, message, entries], ...] */
static VALUE config_results(const rd_kafka_ConfigResource_t **resources, size_t cnt) {
    VALUE out = rb_ary_new_capa((long)cnt);
    for (size_t i = 0; i < cnt; i++)
        rb_ary_push(out, rb_ary_new_from_args(4, rb_str_new_cstr(rd_kafka_ConfigResource_name(resources[i])),
                                              INT2FIX(rd_kafka_ConfigResource_error(resources[i])),
                                              sluice_str_or_nil(rd_kafka_ConfigResource_error_string(resources[i])),
                                              config_entries(resources[i])));
    return out;
}

/* [[group, code, message, [[topic, partition, offset, code], ...]], ...] */
static VALUE group_results(const rd_kafka_group_result_t **results, size_t cnt) {
    VALUE out = rb_ary_new_capa((long)cnt);
    for (size_t i = 0; i < cnt; i++) {
        VALUE error = error_pair(rd_kafka_group_result_error(results[i]));
        rb_ary_push(out, rb_ary_new_from_args(4, rb_str_new_cstr(rd_kafka_group_result_name(results[i])), RARRAY_AREF(error, 0),
                                              RARRAY_AREF(error, 1), sluice_partitions_to_ary(rd_kafka_group_result_partitions(results[i]))));
    }
    return out;
}

/*
 * [[[group, state, simple], ...], [[code, message], ...]]: the listings, and
 * the errors of the brokers that did not answer (the listing asks every
 * broker: without them a broker that did not answer looks like no groups).
 */
static VALUE group_listings(const rd_kafka_ListConsumerGroups_result_t *res) {
    size_t cnt = 0, error_cnt = 0;
    const rd_kafka_ConsumerGroupListing_t **groups = rd_kafka_ListConsumerGroups_result_valid(res, &cnt);
    const rd_kafka_error_t **errors = rd_kafka_ListConsumerGroups_result_errors(res, &error_cnt);
    VALUE out = rb_ary_new_capa((long)cnt);
    for (size_t i = 0; i < cnt; i++)
        rb_ary_push(out, rb_ary_new_from_args(3, rb_str_new_cstr(rd_kafka_ConsumerGroupListing_group_id(groups[i])),
                                              rb_str_new_cstr(rd_kafka_consumer_group_state_name(rd_kafka_ConsumerGroupListing_state(groups[i]))),
                                              rd_kafka_ConsumerGroupListing_is_simple_consumer_group(groups[i]) ? Qtrue : Qfalse));
    VALUE failed = rb_ary_new_capa((long)error_cnt);
    for (size_t i = 0; i < error_cnt; i++) rb_ary_push(failed, error_pair(errors[i]));
    return rb_ary_new_from_args(2, out, failed);
}

static VALUE assignment_partitions(const rd_kafka_MemberAssignment_t *assignment) {
    return sluice_partitions_to_ary(assignment ? rd_kafka_MemberAssignment_partitions(assignment) : NULL);
}

/* librdkafka 2.10 describes KIP-848 groups: their type, and each member's target assignment. */
#if RD_KAFKA_VERSION >= 0x020a0000
#define GROUP_TYPE(g) rb_str_new_cstr(rd_kafka_consumer_group_type_name(rd_kafka_ConsumerGroupDescription_type(g)))
static VALUE target_assignment(const rd_kafka_MemberDescription_t *member) {
    const rd_kafka_MemberAssignment_t *target = rd_kafka_MemberDescription_target_assignment(member);
    return target ? assignment_partitions(target) : Qnil; /* NULL: a classic group's member */
}
#define TARGET_ASSIGNMENT(m) target_assignment(m)
#else
#define GROUP_TYPE(g) Qnil
#define TARGET_ASSIGNMENT(m) Qnil
#endif

/* [[member_id, client_id, host, [[topic, partition, offset, code], ...], group_instance_id, target (nil: none)], ...] */
static VALUE group_members(const rd_kafka_ConsumerGroupDescription_t *group) {
    size_t cnt = rd_kafka_ConsumerGroupDescription_member_count(group);
    VALUE out = rb_ary_new_capa((long)cnt);
    for (size_t i = 0; i < cnt; i++) {
        const rd_kafka_MemberDescription_t *m = rd_kafka_ConsumerGroupDescription_member(group, i);
        VALUE v[6] = {sluice_str_or_nil(rd_kafka_MemberDescription_consumer_id(m)), sluice_str_or_nil(rd_kafka_MemberDescription_client_id(m)),
                      sluice_str_or_nil(rd_kafka_MemberDescription_host(m)), assignment_partitions(rd_kafka_MemberDescription_assignment(m)),
                      sluice_str_or_nil(rd_kafka_MemberDescription_group_instance_id(m)), TARGET_ASSIGNMENT(m)};
        rb_ary_push(out, rb_ary_new_from_values(6, v));
    }
    return out;
}

/* [[group, code, message, state, assignor, members, type (nil: unknown to this librdkafka)], ...] */
static VALUE group_descriptions(const rd_kafka_DescribeConsumerGroups_result_t *res) {
    size_t cnt = 0;
    const rd_kafka_ConsumerGroupDescription_t **groups = rd_kafka_DescribeConsumerGroups_result_groups(res, &cnt);
    VALUE out = rb_ary_new_capa((long)cnt);
    for (size_t i = 0; i < cnt; i++) {
        const rd_kafka_ConsumerGroupDescription_t *g = groups[i];
        VALUE error = error_pair(rd_kafka_ConsumerGroupDescription_error(g));
        VALUE v[7] = {rb_str_new_cstr(rd_kafka_ConsumerGroupDescription_group_id(g)), RARRAY_AREF(error, 0), RARRAY_AREF(error, 1),
                      rb_str_new_cstr(rd_kafka_consumer_group_state_name(rd_kafka_ConsumerGroupDescription_state(g))),
                      sluice_str_or_nil(rd_kafka_ConsumerGroupDescription_partition_assignor(g)), group_members(g), GROUP_TYPE(g)};
        rb_ary_push(out, rb_ary_new_from_values(7, v));
    }
    return out;
}

/* The payload of an admin result event; Qundef for any other event. */
/* The results' array first, then its count: C leaves the order of a call's arguments open. */
#define ITEMS(convert, list_fn, result_fn) \
    do { \
        __typeof__(list_fn(result_fn(ev), &cnt)) items = list_fn(result_fn(ev), &cnt); \
        return convert(items, cnt); \
    } while (0)

/* The payload of an admin result event; Qundef for any other event. */
static VALUE result_payload(rd_kafka_event_t *ev) {
    size_t cnt = 0;
    switch (rd_kafka_event_type(ev)) {
    case RD_KAFKA_EVENT_CREATETOPICS_RESULT:
        ITEMS(topic_results, rd_kafka_CreateTopics_result_topics, rd_kafka_event_CreateTopics_result);
    case RD_KAFKA_EVENT_DELETETOPICS_RESULT:
        ITEMS(topic_results, rd_kafka_DeleteTopics_result_topics, rd_kafka_event_DeleteTopics_result);
    case RD_KAFKA_EVENT_CREATEPARTITIONS_RESULT:
        ITEMS(topic_results, rd_kafka_CreatePartitions_result_topics, rd_kafka_event_CreatePartitions_result);
    case RD_KAFKA_EVENT_DESCRIBECONFIGS_RESULT:
        ITEMS(config_results, rd_kafka_DescribeConfigs_result_resources, rd_kafka_event_DescribeConfigs_result);
    case RD_KAFKA_EVENT_ALTERCONFIGS_RESULT:
        ITEMS(config_results, rd_kafka_AlterConfigs_result_resources, rd_kafka_event_AlterConfigs_result);
#ifdef RD_KAFKA_EVENT_INCREMENTALALTERCONFIGS_RESULT
    case RD_KAFKA_EVENT_INCREMENTALALTERCONFIGS_RESULT:
        ITEMS(config_results, rd_kafka_IncrementalAlterConfigs_result_resources, rd_kafka_event_IncrementalAlterConfigs_result);
#endif
    case RD_KAFKA_EVENT_DELETEGROUPS_RESULT:
        ITEMS(group_results, rd_kafka_DeleteGroups_result_groups, rd_kafka_event_DeleteGroups_result);
    case RD_KAFKA_EVENT_LISTCONSUMERGROUPOFFSETS_RESULT:
        ITEMS(group_results, rd_kafka_ListConsumerGroupOffsets_result_groups, rd_kafka_event_ListConsumerGroupOffsets_result);
    case RD_KAFKA_EVENT_ALTERCONSUMERGROUPOFFSETS_RESULT:
        ITEMS(group_results, rd_kafka_AlterConsumerGroupOffsets_result_groups, rd_kafka_event_AlterConsumerGroupOffsets_result);
    case RD_KAFKA_EVENT_LISTCONSUMERGROUPS_RESULT:
        return group_listings(rd_kafka_event_ListConsumerGroups_result(ev));
    case RD_KAFKA_EVENT_DESCRIBECONSUMERGROUPS_RESULT:
        return group_descriptions(rd_kafka_event_DescribeConsumerGroups_result(ev));
    default:
        return Qundef;
    }
}

/*
 * An admin result -> [request_id, error_code, message, payload], or Qundef for
 * any other event (client_kind_t.result, for drain.c). A request-level error (a timeout, say) has no payload.
 */
static VALUE admin_result(rd_kafka_event_t *ev) {
    VALUE payload = result_payload(ev);
    if (payload == Qundef) return Qundef;
    rd_kafka_resp_err_t err = rd_kafka_event_error(ev);
    VALUE id = ULONG2NUM((unsigned long)(uintptr_t)rd_kafka_event_opaque(ev));
    return rb_ary_new_from_args(4, id, INT2FIX(err), err ? sluice_str_or_nil(rd_kafka_event_error_string(ev)) : Qnil,
                                err ? Qnil : payload);
}

/* ---- blocking calls of the handle (GVL released through the client's gate) ---- */

struct describe_args {
    client_t *c;
    int timeout_ms;
    rd_kafka_resp_err_t err;
    const struct rd_kafka_metadata *md;
    char *cluster_id;
    int32_t controller_id;
};

/* Cluster-wide metadata: every topic, every broker. Kept for the caller, who destroys it. */
static void *describe_nogvl(void *p) {
    struct describe_args *a = p;
    a->err = rd_kafka_metadata(a->c->rk, 1, NULL, &a->md, a->timeout_ms);
    if (!a->err) {
        a->cluster_id = rd_kafka_clusterid(a->c->rk, a->timeout_ms);
        a->controller_id = rd_kafka_controllerid(a->c->rk, a->timeout_ms);
    }
    return NULL;
}

static VALUE int32_ary(const int32_t *v, int n) {
    VALUE out = rb_ary_new_capa(n);
    for (int i = 0; i < n; i++) rb_ary_push(out, INT2FIX(v[i]));
    return out;
}

/* [[name, code, [[partition, leader, replicas, isr, code], ...]], ...] */
static VALUE metadata_topics(const struct rd_kafka_metadata *md) {
    VALUE out = rb_ary_new_capa(md->topic_cnt);
    for (int i = 0; i < md->topic_cnt; i++) {
        const struct rd_kafka_metadata_topic *t = &md->topics[i];
        VALUE partitions = rb_ary_new_capa(t->partition_cnt);
        for (int j = 0; j < t->partition_cnt; j++) {
            const struct rd_kafka_metadata_partition *p = &t->partitions[j];
            VALUE v[5] = {INT2FIX(p->id), INT2FIX(p->leader), int32_ary(p->replicas, p->replica_cnt), int32_ary(p->isrs, p->isr_cnt),
                          INT2FIX(p->err)};
            rb_ary_push(partitions, rb_ary_new_from_values(5, v));
        }
        rb_ary_push(out, rb_ary_new_from_args(3, rb_str_new_cstr(t->topic), INT2FIX(t->err), partitions));
    }
    return out;
}

/* [[id, host, port], ...] */
static VALUE metadata_brokers(const struct rd_kafka_metadata *md) {
    VALUE out = rb_ary_new_capa(md->broker_cnt);
    for (int i = 0; i < md->broker_cnt; i++)
        rb_ary_push(out, rb_ary_new_from_args(3, INT2FIX(md->brokers[i].id), rb_str_new_cstr(md->brokers[i].host),
                                              INT2FIX(md->brokers[i].port)));
    return out;
}

static VALUE describe_to_ary(VALUE p) {
    struct describe_args *a = (struct describe_args *)p;
    VALUE v[5] = {INT2FIX(a->err), Qnil, Qnil, Qnil, Qnil};
    if (a->md) {
        v[1] = metadata_topics(a->md);
        v[2] = metadata_brokers(a->md);
        v[3] = sluice_str_or_nil(a->cluster_id);
        v[4] = INT2FIX(a->controller_id);
    }
    return rb_ary_new_from_values(5, v);
}

static VALUE describe_release(VALUE p) {
    struct describe_args *a = (struct describe_args *)p;
    if (a->md) rd_kafka_metadata_destroy(a->md);
    if (a->cluster_id) rd_kafka_mem_free(NULL, a->cluster_id);
    a->md = NULL;
    a->cluster_id = NULL;
    return Qnil;
}

/*
 * #describe(timeout_ms) -> [code, topics, brokers, cluster_id, controller_id]
 * (topics: see metadata_topics; brokers: [[id, host, port], ...])
 */
static VALUE admin_describe(VALUE self, VALUE timeout) {
    client_t *c = sluice_client_open(self);
    struct describe_args a = {c, NUM2INT(timeout), RD_KAFKA_RESP_ERR__TIMED_OUT, NULL, NULL, -1};
    sluice_gate_enter(c, describe_nogvl, &a, NULL, NULL, NULL);
    int state = 0;
    VALUE out = rb_protect(describe_to_ary, (VALUE)&a, &state);
    describe_release((VALUE)&a);
    sluice_gate_leave(c); /* an interrupt that came meanwhile is raised here, with nothing left to free */
    if (state) rb_jump_tag(state);
    return out;
}

struct watermarks_args {
    client_t *c;
    const char *topic;
    int32_t partition;
    int timeout_ms;
    rd_kafka_resp_err_t err;
    int64_t low, high;
};

static void *watermarks_nogvl(void *p) {
    struct watermarks_args *a = p;
    a->err = rd_kafka_query_watermark_offsets(a->c->rk, a->topic, a->partition, &a->low, &a->high, a->timeout_ms);
    return NULL;
}

/* #watermarks(topic, partition, timeout_ms) -> [code, low, high] */
static VALUE admin_watermarks(VALUE self, VALUE topic, VALUE partition, VALUE timeout) {
    client_t *c = sluice_client_open(self);
    struct watermarks_args a = {c, StringValueCStr(topic), NUM2INT(partition), NUM2INT(timeout), RD_KAFKA_RESP_ERR__TIMED_OUT, -1, -1};
    sluice_gate_enter(c, watermarks_nogvl, &a, NULL, NULL, NULL);
    sluice_gate_leave(c);
    return rb_ary_new_from_args(3, INT2FIX(a.err), LL2NUM(a.low), LL2NUM(a.high));
}

struct times_args {
    client_t *c;
    rd_kafka_topic_partition_list_t *list;
    int timeout_ms;
    rd_kafka_resp_err_t err;
};

static void *times_nogvl(void *p) {
    struct times_args *a = p;
    a->err = rd_kafka_offsets_for_times(a->c->rk, a->list, a->timeout_ms);
    return NULL;
}

static void release_list(void *p) {
    struct times_args *a = p;
    rd_kafka_topic_partition_list_destroy(a->list);
    a->list = NULL;
}

static VALUE times_to_ary(VALUE p) {
    struct times_args *a = (struct times_args *)p;
    return rb_ary_new_from_args(2, INT2FIX(a->err), sluice_partitions_to_ary(a->list));
}

/* #offsets_for_times([[topic, partition, timestamp_ms], ...], timeout_ms) -> [code, [[topic, partition, offset, code], ...]] */
static VALUE admin_offsets_for_times(VALUE self, VALUE query, VALUE timeout) {
    client_t *c = sluice_client_open(self);
    int ms = NUM2INT(timeout);
    struct times_args a = {c, sluice_partitions_from(query), ms, RD_KAFKA_RESP_ERR__TIMED_OUT};
    sluice_gate_enter(c, times_nogvl, &a, NULL, NULL, release_list);
    int state = 0;
    VALUE out = rb_protect(times_to_ary, (VALUE)&a, &state);
    release_list(&a);
    sluice_gate_leave(c);
    if (state) rb_jump_tag(state);
    return out;
}

static VALUE admin_initialize(VALUE self, VALUE pairs) {
    client_t *c = sluice_client_get(self);
    rd_kafka_conf_t *conf = sluice_conf_new(pairs, NULL, c);
    sluice_client_start(self, c, RD_KAFKA_PRODUCER, conf, RD_KAFKA_EVENT_ERROR | RD_KAFKA_EVENT_STATS | RD_KAFKA_EVENT_OAUTHBEARER_TOKEN_REFRESH, 0);
    return self;
}

/* An admin holds nothing besides the handle: the base releases it all (client_kind_t, client.h). */
static const client_kind_t admin_kind = {
    .name = "admin",
    .closed_error = &sluice_eProducerClosed,
    .result = admin_result,
};

void sluice_init_admin(VALUE client) {
    rb_define_method(client, "partition_count", client_partition_count, 2);

    VALUE klass = rb_define_class_under(sluice_mNative, "Admin", client);
    rb_define_method(klass, "initialize", admin_initialize, 1);
    rb_define_method(klass, "create_topic", admin_create_topic, 6);
    rb_define_method(klass, "delete_topic", admin_delete_topic, 3);
    rb_define_method(klass, "create_partitions", admin_create_partitions, 4);
    rb_define_method(klass, "describe_configs", admin_describe_configs, 4);
    rb_define_method(klass, "alter_configs", admin_alter_configs, 5);
#ifdef RD_KAFKA_EVENT_INCREMENTALALTERCONFIGS_RESULT
    rb_define_method(klass, "incremental_alter_configs", admin_incremental_alter_configs, 6);
#endif
    rb_define_method(klass, "list_groups", admin_list_groups, 2);
    rb_define_method(klass, "describe_group", admin_describe_group, 3);
    rb_define_method(klass, "delete_group", admin_delete_group, 3);
    rb_define_method(klass, "list_group_offsets", admin_list_group_offsets, 3);
    rb_define_method(klass, "alter_group_offsets", admin_alter_group_offsets, 4);
    rb_define_method(klass, "describe", admin_describe, 1);
    rb_define_method(klass, "watermarks", admin_watermarks, 3);
    rb_define_method(klass, "offsets_for_times", admin_offsets_for_times, 2);
    sluice_client_kind(klass, &admin_kind);
}
