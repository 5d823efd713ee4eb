#include "raw_baselines.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

struct server_args {
    void *context;
    char endpoint[256];
    size_t chunk;
    uint64_t total;
    pthread_mutex_t lock;
    pthread_cond_t bound;
    int ready;
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

// The ROUTER: every request (identity + empty body) gets the next chunk, until `total` is sent.
static void *serve(void *raw) {
    struct server_args *args = raw;
    void *router = zmq_socket(args->context, ZMQ_ROUTER);
    // Linger long enough that closing after the last send still delivers the tail.
    int hwm = 10000, linger = 5000;
    zmq_setsockopt(router, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_bind(router, "tcp://127.0.0.1:*");
    size_t size = sizeof args->endpoint;
    zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, args->endpoint, &size);
    pthread_mutex_lock(&args->lock);
    args->ready = 1;
    pthread_cond_signal(&args->bound);
    pthread_mutex_unlock(&args->lock);

    char *data = malloc(args->chunk);
    memset(data, 0x5A, args->chunk);
    uint64_t sent = 0;
    char identity[256];
    char request[16];
    while (sent < args->total) {
        int id_size = zmq_recv(router, identity, sizeof identity, 0);
        if (id_size < 0) break;
        if (zmq_recv(router, request, sizeof request, 0) < 0) break;
        size_t n = args->total - sent < args->chunk ? (size_t)(args->total - sent) : args->chunk;
        zmq_send(router, identity, (size_t)id_size, ZMQ_SNDMORE);
        zmq_send(router, data, n, 0);
        sent += n;
    }
    free(data);
    zmq_close(router);
    return NULL;
}

double raw_dealer_router_transfer(uint64_t total, size_t chunk, int window) {
    void *context = zmq_ctx_new();
    struct server_args args = {.context = context, .chunk = chunk, .total = total};
    pthread_mutex_init(&args.lock, NULL);
    pthread_cond_init(&args.bound, NULL);
    pthread_t server;
    pthread_create(&server, NULL, serve, &args);
    pthread_mutex_lock(&args.lock);
    while (!args.ready) pthread_cond_wait(&args.bound, &args.lock);
    pthread_mutex_unlock(&args.lock);

    void *dealer = zmq_socket(context, ZMQ_DEALER);
    int hwm = 10000, linger = 0;
    zmq_setsockopt(dealer, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(dealer, ZMQ_LINGER, &linger, sizeof linger);
    zmq_connect(dealer, args.endpoint);

    double started = now();
    int credit = window;
    uint64_t received = 0;
    zmq_msg_t message;
    zmq_msg_init(&message);
    while (received < total) {
        while (credit > 0) {
            zmq_send(dealer, "", 0, 0);
            credit--;
        }
        int size = zmq_msg_recv(&message, dealer, 0);
        if (size < 0) {
            received = 0;
            break;
        }
        received += (uint64_t)size;
        credit++;
    }
    double elapsed = now() - started;
    zmq_msg_close(&message);
    zmq_close(dealer);
    pthread_join(server, NULL);
    zmq_ctx_term(context);
    pthread_mutex_destroy(&args.lock);
    pthread_cond_destroy(&args.bound);
    return received == total ? elapsed : -1;
}
