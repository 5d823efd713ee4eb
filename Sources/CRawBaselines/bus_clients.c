#include "bus_clients.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

static double monotonic_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

/// Makes `socket` a CURVE client of the broker, when `curve` names its key.
static void apply_curve(void *socket, struct bus_curve curve) {
    if (curve.server == NULL) return;
    zmq_setsockopt(socket, ZMQ_CURVE_SERVERKEY, curve.server, strlen(curve.server));
    zmq_setsockopt(socket, ZMQ_CURVE_PUBLICKEY, curve.public_key, strlen(curve.public_key));
    zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, curve.secret_key, strlen(curve.secret_key));
}

static uint32_t read_u32(const uint8_t *bytes) {
    return (uint32_t)bytes[0] | (uint32_t)bytes[1] << 8 | (uint32_t)bytes[2] << 16 | (uint32_t)bytes[3] << 24;
}

int bus_publish(const char *frontend, struct bus_curve curve, const uint8_t *records, size_t length, int repeat, double *seconds) {
    void *context = zmq_ctx_new();
    void *socket = zmq_socket(context, ZMQ_XPUB);
    int unlimited = 0, wait_ms = 10000, linger = -1;
    zmq_setsockopt(socket, ZMQ_SNDHWM, &unlimited, sizeof unlimited);
    zmq_setsockopt(socket, ZMQ_RCVTIMEO, &wait_ms, sizeof wait_ms);
    zmq_setsockopt(socket, ZMQ_LINGER, &linger, sizeof linger);
    apply_curve(socket, curve);
    int sent = -1;
    if (zmq_connect(socket, frontend) != 0) goto done;
    uint8_t subscription[256];
    int got = zmq_recv(socket, subscription, sizeof subscription, 0);
    if (got < 1 || subscription[0] != 1) goto done;
    sent = 0;
    double started = monotonic_seconds();
    for (int round = 0; round < repeat; round++) {
        size_t at = 0;
        while (at + 8 <= length) {
            uint32_t topic_length = read_u32(records + at);
            const uint8_t *topic = records + at + 4;
            uint32_t body_length = read_u32(topic + topic_length);
            const uint8_t *body = topic + topic_length + 4;
            if (zmq_send(socket, topic, topic_length, ZMQ_SNDMORE) < 0 || zmq_send(socket, body, body_length, 0) < 0) {
                sent = -1;
                goto done;
            }
            sent++;
            at += 8 + topic_length + body_length;
        }
    }
    *seconds = monotonic_seconds() - started;
done:
    zmq_close(socket);  // lingers until every message has left
    zmq_ctx_term(context);
    return sent;
}

struct bus_subscriber {
    void *context;
    void *socket;
};

struct bus_subscriber *bus_subscriber_open(const char *backend, struct bus_curve curve, const char *prefix) {
    struct bus_subscriber *subscriber = calloc(1, sizeof *subscriber);
    subscriber->context = zmq_ctx_new();
    subscriber->socket = zmq_socket(subscriber->context, ZMQ_SUB);
    int unlimited = 0, linger = 0;
    zmq_setsockopt(subscriber->socket, ZMQ_RCVHWM, &unlimited, sizeof unlimited);
    zmq_setsockopt(subscriber->socket, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(subscriber->socket, ZMQ_SUBSCRIBE, prefix, strlen(prefix));
    apply_curve(subscriber->socket, curve);
    if (zmq_connect(subscriber->socket, backend) != 0) {
        zmq_close(subscriber->socket);
        zmq_ctx_term(subscriber->context);
        free(subscriber);
        return NULL;
    }
    return subscriber;
}

int bus_subscriber_count(struct bus_subscriber *subscriber, int expected, int idle_ms,
                         double *seconds, uint64_t *bytes) {
    int received = 0;
    double first = 0, last = 0;
    *bytes = 0;
    zmq_msg_t message;
    zmq_msg_init(&message);
    // The first message may be far off (the publisher starts later): wait for it without limit.
    while (received < expected) {
        if (zmq_msg_recv(&message, subscriber->socket, 0) < 0) break;
        *bytes += zmq_msg_size(&message);
        if (zmq_msg_more(&message)) continue;
        last = monotonic_seconds();
        if (received == 0) {
            first = last;
            zmq_setsockopt(subscriber->socket, ZMQ_RCVTIMEO, &idle_ms, sizeof idle_ms);
        }
        received++;
    }
    zmq_msg_close(&message);
    *seconds = last - first;
    zmq_close(subscriber->socket);
    zmq_ctx_term(subscriber->context);
    free(subscriber);
    return received;
}
