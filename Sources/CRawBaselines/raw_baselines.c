#include "raw_baselines.h"
#include "bench_clock.h"
#include "handoff_checksum.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

struct server_args {
    void *context;
    char endpoint[256];
    size_t chunk;
    uint64_t total;
    int checksum;
    pthread_mutex_t lock;
    pthread_cond_t bound;
    int ready;
    /// Z85; NULL: no CURVE.
    const char *curve_secret;
};

// What the checksums come to, so that nothing computes them for nobody.
static uint32_t checksum_sink;

// The ROUTER's side: every request (identity + empty body) gets the next chunk, until `total` is sent.
// With `checksum`, each chunk is copied into libzmq's buffer and checksummed (CRC-32C) in the same
// pass, as a Handoff writer does; without, `zmq_send` copies it.
static void serve_chunks(void *router, uint64_t total, size_t chunk, int checksum) {
    char *data = malloc(chunk);
    memset(data, 0x5A, chunk);
    uint64_t sent = 0;
    uint32_t crc = 0;
    char identity[256];
    char request[16];
    while (sent < total) {
        int id_size = zmq_recv(router, identity, sizeof identity, 0);
        if (id_size < 0) break;
        if (zmq_recv(router, request, sizeof request, 0) < 0) break;
        size_t n = total - sent < chunk ? (size_t)(total - sent) : chunk;
        zmq_send(router, identity, (size_t)id_size, ZMQ_SNDMORE);
        if (checksum) {
            zmq_msg_t message;
            zmq_msg_init_size(&message, n);
            crc = handoff_crc32c_copy(crc, zmq_msg_data(&message), data, n);
            if (zmq_msg_send(&message, router, 0) < 0) zmq_msg_close(&message);
        } else {
            zmq_send(router, data, n, 0);
        }
        sent += n;
    }
    __atomic_store_n(&checksum_sink, crc, __ATOMIC_RELAXED);
    free(data);
}

// A ROUTER bound at `bind` (a tcp endpoint with a port or `*`), its endpoint in `endpoint`.
static void *bind_router(void *context, const char *bind, char *endpoint, size_t capacity) {
    void *router = zmq_socket(context, ZMQ_ROUTER);
    // Linger long enough that closing after the last send still delivers the tail.
    // A peer that goes away ends the transfer (as a failure) instead of blocking it forever.
    int hwm = 10000, linger = 5000, patience = 10000;
    zmq_setsockopt(router, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(router, ZMQ_RCVTIMEO, &patience, sizeof patience);
    if (zmq_bind(router, bind) != 0) {
        zmq_close(router);
        return NULL;
    }
    zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, endpoint, &capacity);
    return router;
}

// The DEALER's side: keeps `window` requests outstanding, one per chunk, and asks for no chunk beyond
// `total`; returns the bytes received. (A request the server never reads would still be in its
// socket's receive buffer when it closes, and Linux then answers with a reset that can destroy the
// last chunks before they are read.)
// With `checksum`, every byte received is checksummed (CRC-32C), as a Handoff reader does; without,
// no byte is read.
static uint64_t fetch_chunks(void *dealer, uint64_t total, size_t chunk, int window, int checksum) {
    int credit = window;
    uint64_t received = 0, requested = 0;
    uint32_t crc = 0;
    zmq_msg_t message;
    zmq_msg_init(&message);
    while (received < total) {
        while (credit > 0 && requested < total) {
            zmq_send(dealer, "", 0, 0);
            credit--;
            requested += chunk;
        }
        int size = zmq_msg_recv(&message, dealer, 0);
        if (size < 0) break;
        if (checksum) crc = handoff_crc32c(crc, zmq_msg_data(&message), (size_t)size);
        received += (uint64_t)size;
        credit++;
    }
    __atomic_store_n(&checksum_sink, crc, __ATOMIC_RELAXED);
    zmq_msg_close(&message);
    return received;
}

static void *connect_dealer(void *context, const char *endpoint) {
    void *dealer = zmq_socket(context, ZMQ_DEALER);
    int hwm = 10000, linger = 0, patience = 10000;
    zmq_setsockopt(dealer, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(dealer, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(dealer, ZMQ_RCVTIMEO, &patience, sizeof patience);
    zmq_connect(dealer, endpoint);
    return dealer;
}

static void *serve(void *raw) {
    struct server_args *args = raw;
    void *router = bind_router(args->context, "tcp://127.0.0.1:*", args->endpoint, sizeof args->endpoint);
    pthread_mutex_lock(&args->lock);
    args->ready = 1;
    pthread_cond_signal(&args->bound);
    pthread_mutex_unlock(&args->lock);
    if (router == NULL) return NULL;
    serve_chunks(router, args->total, args->chunk, args->checksum);
    zmq_close(router);
    return NULL;
}

// The serving end of a transfer between two processes: one socket in a context of its own.
struct raw_server {
    void *context;
    void *socket;
};

// A server whose socket `bind_socket` makes and binds at `bind`; NULL when the bind fails.
static struct raw_server *server_bind(void *(*bind_socket)(void *, const char *, char *, size_t),
                                      const char *bind, char *endpoint, size_t capacity) {
    struct raw_server *server = calloc(1, sizeof *server);
    server->context = zmq_ctx_new();
    server->socket = bind_socket(server->context, bind, endpoint, capacity);
    if (server->socket == NULL) {
        zmq_ctx_term(server->context);
        free(server);
        return NULL;
    }
    return server;
}

static void server_close(struct raw_server *server) {
    zmq_close(server->socket);
    zmq_ctx_term(server->context);
    free(server);
}

struct raw_server *raw_stream_bind(const char *bind, char *endpoint, size_t capacity) {
    return server_bind(bind_router, bind, endpoint, capacity);
}

void raw_stream_serve(struct raw_server *server, uint64_t total, size_t chunk, int checksum) {
    serve_chunks(server->socket, total, chunk, checksum);
    server_close(server);
}

double raw_stream_fetch(const char *endpoint, uint64_t total, size_t chunk, int window, int checksum) {
    void *context = zmq_ctx_new();
    void *dealer = connect_dealer(context, endpoint);
    double started = now();
    uint64_t received = fetch_chunks(dealer, total, chunk, window, checksum);
    double elapsed = now() - started;
    zmq_close(dealer);
    zmq_ctx_term(context);
    return received == total ? elapsed : -1;
}

double raw_dealer_router_transfer(uint64_t total, size_t chunk, int window, int checksum) {
    void *context = zmq_ctx_new();
    struct server_args args = {.context = context, .chunk = chunk, .total = total, .checksum = checksum};
    pthread_mutex_init(&args.lock, NULL);
    pthread_cond_init(&args.bound, NULL);
    pthread_t server;
    pthread_create(&server, NULL, serve, &args);
    pthread_mutex_lock(&args.lock);
    while (!args.ready) pthread_cond_wait(&args.bound, &args.lock);
    pthread_mutex_unlock(&args.lock);

    void *dealer = connect_dealer(context, args.endpoint);
    double started = now();
    uint64_t received = fetch_chunks(dealer, total, chunk, window, checksum);
    double elapsed = now() - started;
    zmq_close(dealer);
    pthread_join(server, NULL);
    zmq_ctx_term(context);
    pthread_mutex_destroy(&args.lock);
    pthread_cond_destroy(&args.bound);
    return received == total ? elapsed : -1;
}

// MARK: REQ/REP

struct rep_args {
    void *context;
    char endpoint[256];
    int rounds;
    pthread_mutex_t lock;
    pthread_cond_t bound;
    int ready;
    /// Z85; NULL: no CURVE.
    const char *curve_secret;
};

// Answers `rounds` requests on `rep` with the request itself.
static void echo_rounds(void *rep, int rounds) {
    zmq_msg_t message;
    zmq_msg_init(&message);
    for (int i = 0; i < rounds; i++) {
        if (zmq_msg_recv(&message, rep, 0) < 0) break;
        if (zmq_msg_send(&message, rep, 0) < 0) break;
    }
    zmq_msg_close(&message);
}

// A REP bound at `bind`, its endpoint in `endpoint`; NULL when the bind fails.
static void *bind_rep(void *context, const char *bind, char *endpoint, size_t capacity) {
    void *rep = zmq_socket(context, ZMQ_REP);
    int linger = 0;
    zmq_setsockopt(rep, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_bind(rep, bind) != 0) {
        zmq_close(rep);
        return NULL;
    }
    size_t size = capacity;
    zmq_getsockopt(rep, ZMQ_LAST_ENDPOINT, endpoint, &size);
    return rep;
}

// `rounds` round trips of `size` bytes on a connected REQ, each one's microseconds in `latencies`.
static int req_rounds(void *req, int rounds, size_t size, double *latencies) {
    char *body = calloc(1, size ? size : 1);
    char *reply = malloc(size + 16);
    int status = 0;
    for (int i = 0; i < rounds; i++) {
        double started = now();
        if (zmq_send(req, body, size, 0) < 0 || zmq_recv(req, reply, size + 16, 0) < 0) {
            status = -1;
            break;
        }
        latencies[i] = (now() - started) * 1e6;
    }
    free(body);
    free(reply);
    return status;
}

static void *connect_req(void *context, const char *endpoint) {
    void *req = zmq_socket(context, ZMQ_REQ);
    int linger = 0, patience = 10000;
    zmq_setsockopt(req, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(req, ZMQ_RCVTIMEO, &patience, sizeof patience);
    zmq_connect(req, endpoint);
    return req;
}

static void *echo(void *raw) {
    struct rep_args *args = raw;
    void *rep = bind_rep(args->context, "tcp://127.0.0.1:*", args->endpoint, sizeof args->endpoint);
    pthread_mutex_lock(&args->lock);
    args->ready = 1;
    pthread_cond_signal(&args->bound);
    pthread_mutex_unlock(&args->lock);
    if (rep == NULL) return NULL;
    echo_rounds(rep, args->rounds);
    zmq_close(rep);
    return NULL;
}

int raw_req_rep(int rounds, size_t size, double *latencies) {
    void *context = zmq_ctx_new();
    struct rep_args args = {.context = context, .rounds = rounds};
    pthread_mutex_init(&args.lock, NULL);
    pthread_cond_init(&args.bound, NULL);
    pthread_t server;
    pthread_create(&server, NULL, echo, &args);
    pthread_mutex_lock(&args.lock);
    while (!args.ready) pthread_cond_wait(&args.bound, &args.lock);
    pthread_mutex_unlock(&args.lock);
    void *req = connect_req(context, args.endpoint);
    int status = req_rounds(req, rounds, size, latencies);
    zmq_close(req);
    pthread_join(server, NULL);
    zmq_ctx_term(context);
    return status;
}

struct raw_server *raw_rep_bind(const char *bind, char *endpoint, size_t capacity) {
    return server_bind(bind_rep, bind, endpoint, capacity);
}

void raw_rep_serve(struct raw_server *server, int rounds) {
    echo_rounds(server->socket, rounds);
    server_close(server);
}

int raw_req_fetch(const char *endpoint, int rounds, size_t size, double *latencies) {
    void *context = zmq_ctx_new();
    void *req = connect_req(context, endpoint);
    int status = req_rounds(req, rounds, size, latencies);
    zmq_close(req);
    zmq_ctx_term(context);
    return status;
}
