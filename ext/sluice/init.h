/*
 * Each file's Init function. Init_sluice_ext (sluice.c) calls every one
 * exactly once, in the order it explains; no file calls another's. A class is
 * defined by the file that owns its struct or its constructor, and handed to
 * the files that add methods to it.
 */
#ifndef SLUICE_INIT_H
#define SLUICE_INIT_H

#include "common.h"

void sluice_init_resolve(void);                 /* resolve.c: the fork handler of the resolver */
void sluice_init_delivery_handle(void);         /* delivery_handle.c: the names of DeliveryHandle's fields */
VALUE sluice_init_client(void);                 /* client.c: defines and returns Native::Client */
void sluice_init_drain(VALUE cClient);          /* drain.c: the main-queue methods of every client */
void sluice_init_admin(VALUE cClient);          /* admin.c: Client#partition_count, Native::Admin */
VALUE sluice_init_produce(VALUE cClient);       /* produce.c: defines and returns Native::Producer */
void sluice_init_transactions(VALUE cProducer); /* transactions.c */
VALUE sluice_init_consumer(VALUE cClient);      /* consumer.c: defines and returns Native::Consumer */
void sluice_init_consume(VALUE cConsumer);      /* consume.c: its queue's methods; Native::Handoff; Sluice::Message */
void sluice_init_share_consumer(void);         /* share_consumer.c: Native::ShareConsumer (librdkafka 2.15.0 on) */
void sluice_init_selector(void);                /* selector.c: Native::Selector */
void sluice_init_test_hooks(void);              /* test_hooks.c: Native::TestHooks */
void sluice_init_mock_cluster(void);            /* mock_cluster.c: Native::MockCluster (where librdkafka has its mock) */

#endif
