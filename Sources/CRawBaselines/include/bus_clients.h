#ifndef HANDOFF_BUS_CLIENTS_H
#define HANDOFF_BUS_CLIENTS_H

#include <stddef.h>
#include <stdint.h>

// Bus clients in plain C on libzmq, for measuring a broker from outside (handoff-bench
// broker-capacity): what they spend is libzmq's, so what the broker spends is all that differs
// between a Handoff broker and a raw proxy.

/// A client's CURVE keys, Z85 text: the broker's public key, the client's public and secret keys.
/// A NULL `server` is no CURVE.
struct bus_curve {
    const char *server;
    const char *public_key;
    const char *secret_key;
};

/// Publishes the messages of `records` (each a little-endian u32 length and a topic, then a u32
/// length and a body) `repeat` times through an XPUB (high-water mark unlimited, so nothing is
/// dropped on this side) connected to `frontend`. It first waits up to 10 s for the broker to
/// subscribe (an XSUB resends its subscriptions to each new publisher), so nothing is sent into
/// the void. Writes the seconds the sending took; returns the messages sent, or -1.
int bus_publish(const char *frontend, struct bus_curve curve, const uint8_t *records, size_t length, int repeat, double *seconds);

/// A subscriber (opaque).
struct bus_subscriber;

/// A SUB (high-water mark unlimited) connected to `backend`, subscribed to `prefix`; NULL on failure.
struct bus_subscriber *bus_subscriber_open(const char *backend, struct bus_curve curve, const char *prefix);

/// Receives until `expected` messages (a topic and a body each) arrived or none came for `idle_ms`;
/// writes the seconds from the first message to the last and the bytes received; returns the
/// messages received. Closes and frees `subscriber`.
int bus_subscriber_count(struct bus_subscriber *subscriber, int expected, int idle_ms,
                         double *seconds, uint64_t *bytes);

#endif
