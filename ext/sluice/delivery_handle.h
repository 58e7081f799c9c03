/*
 * delivery_handle.c: the one file that writes a Sluice::DeliveryHandle's
 * fields (lib/sluice/delivery/handle.rb reads them). produce.c builds a handle
 * per message, drain.c records a successful delivery on it; neither names a
 * field.
 */
#ifndef SLUICE_DELIVERY_HANDLE_H
#define SLUICE_DELIVERY_HANDLE_H

#include "common.h"

/* A new handle of klass (the producer's DeliveryHandle) for a message of topic, with its label (nil: none) and notifier. */
VALUE sluice_handle_new(VALUE klass, VALUE topic, VALUE label, VALUE notifier);
/*
 * A successful delivery recorded on handle: @partition (replacing the
 * notifier), then @offset, which ends DeliveryHandle#pending?. Returns 0
 * without writing when someone froze the handle (it cannot take its report,
 * and must not stop the drain).
 */
int sluice_handle_delivered(VALUE handle, int32_t partition, int64_t offset);

#endif
