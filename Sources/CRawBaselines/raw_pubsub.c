// The raw libzmq pub/sub baselines: PUB -> XSUB/XPUB proxy -> SUB, flooded, paced, one at a time.
#include "raw_baselines.h"
#include "bench_clock.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

// MARK: PUB -> XSUB/XPUB proxy -> SUB

struct proxy_args {
    void *context;
    char frontend[256];
    char backend[256];
    pthread_mutex_t lock;
    pthread_cond_t bound;
    int ready;
    /// Z85; NULL: no CURVE.
    const char *curve_secret;
};

static void *run_proxy(void *raw) {
    struct proxy_args *args = raw;
    void *xsub = zmq_socket(args->context, ZMQ_XSUB);
    void *xpub = zmq_socket(args->context, ZMQ_XPUB);
    int hwm = 0, linger = 0;
    zmq_setsockopt(xsub, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(xpub, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(xsub, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(xpub, ZMQ_LINGER, &linger, sizeof linger);
    if (args->curve_secret != NULL) {
        int server = 1;
        void *sockets[] = {xsub, xpub};
        for (int i = 0; i < 2; i++) {
            zmq_setsockopt(sockets[i], ZMQ_CURVE_SERVER, &server, sizeof server);
            zmq_setsockopt(sockets[i], ZMQ_CURVE_SECRETKEY, args->curve_secret, strlen(args->curve_secret));
        }
    }
    zmq_bind(xsub, "tcp://127.0.0.1:*");
    zmq_bind(xpub, "tcp://127.0.0.1:*");
    size_t size = sizeof args->frontend;
    zmq_getsockopt(xsub, ZMQ_LAST_ENDPOINT, args->frontend, &size);
    size = sizeof args->backend;
    zmq_getsockopt(xpub, ZMQ_LAST_ENDPOINT, args->backend, &size);
    pthread_mutex_lock(&args->lock);
    args->ready = 1;
    pthread_cond_signal(&args->bound);
    pthread_mutex_unlock(&args->lock);
    zmq_proxy(xsub, xpub, NULL);  // returns when the context terminates
    zmq_close(xsub);
    zmq_close(xpub);
    return NULL;
}

/// A PUB and a SUB on either side of a zmq_proxy thread, with the subscription already through.
struct pubsub {
    void *context;
    struct proxy_args args;
    pthread_t proxy;
    int own_proxy;
    void *pub;
    void *sub;
};

static const char *bench_topic = "A:org.handoff.bench.advert";

/// Starts a proxy thread in `args->context` and waits until it has bound.
static void proxy_start(struct proxy_args *args, pthread_t *thread) {
    pthread_mutex_init(&args->lock, NULL);
    pthread_cond_init(&args->bound, NULL);
    pthread_create(thread, NULL, run_proxy, args);
    pthread_mutex_lock(&args->lock);
    while (!args->ready) pthread_cond_wait(&args->bound, &args->lock);
    pthread_mutex_unlock(&args->lock);
}

/// Opens the PUB and the SUB at the proxy's `frontend` and `backend`, or, when `frontend` is NULL,
/// at a proxy thread of their own.
static void pubsub_open(struct pubsub *ps, const char *frontend, const char *backend) {
    ps->context = zmq_ctx_new();
    memset(&ps->args, 0, sizeof ps->args);
    ps->args.context = ps->context;
    ps->own_proxy = frontend == NULL;
    if (ps->own_proxy) {
        proxy_start(&ps->args, &ps->proxy);
    } else {
        snprintf(ps->args.frontend, sizeof ps->args.frontend, "%s", frontend);
        snprintf(ps->args.backend, sizeof ps->args.backend, "%s", backend);
    }

    int hwm = 0, linger = 0;
    ps->pub = zmq_socket(ps->context, ZMQ_PUB);
    ps->sub = zmq_socket(ps->context, ZMQ_SUB);
    zmq_setsockopt(ps->pub, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(ps->sub, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(ps->pub, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(ps->sub, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(ps->sub, ZMQ_SUBSCRIBE, "A:", 2);
    zmq_connect(ps->pub, ps->args.frontend);
    zmq_connect(ps->sub, ps->args.backend);

    // Wait until the subscription has crossed the proxy: probe until one arrives.
    char buffer[256];
    for (;;) {
        zmq_send(ps->pub, bench_topic, strlen(bench_topic), ZMQ_SNDMORE);
        zmq_send(ps->pub, "probe", 5, 0);
        zmq_pollitem_t item = {ps->sub, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 10) > 0) break;
    }
    while (zmq_recv(ps->sub, buffer, sizeof buffer, ZMQ_DONTWAIT) >= 0) {}
    usleep(20000);
    while (zmq_recv(ps->sub, buffer, sizeof buffer, ZMQ_DONTWAIT) >= 0) {}
}

static void pubsub_close(struct pubsub *ps) {
    zmq_close(ps->pub);
    zmq_close(ps->sub);
    if (ps->own_proxy) {
        zmq_ctx_shutdown(ps->context);
        pthread_join(ps->proxy, NULL);
    }
    zmq_ctx_term(ps->context);
}

struct raw_proxy {
    struct proxy_args args;
    pthread_t thread;
};

struct raw_proxy *raw_proxy_start(char *frontend, char *backend, size_t capacity) {
    return raw_proxy_start_curve(frontend, backend, capacity, NULL);
}

struct raw_proxy *raw_proxy_start_curve(char *frontend, char *backend, size_t capacity, const char *curve_secret) {
    struct raw_proxy *proxy = calloc(1, sizeof *proxy);
    proxy->args.context = zmq_ctx_new();
    proxy->args.curve_secret = curve_secret;
    proxy_start(&proxy->args, &proxy->thread);
    snprintf(frontend, capacity, "%s", proxy->args.frontend);
    snprintf(backend, capacity, "%s", proxy->args.backend);
    return proxy;
}

void raw_proxy_stop(struct raw_proxy *proxy) {
    zmq_ctx_shutdown(proxy->args.context);
    pthread_join(proxy->thread, NULL);
    zmq_ctx_term(proxy->args.context);
    free(proxy);
}

int raw_pub_proxy_sub(int count, size_t size, double *seconds, double *cpu_seconds, double *latencies, int samples) {
    return raw_pub_proxy_sub_at(NULL, NULL, count, size, seconds, cpu_seconds, latencies, samples);
}

int raw_pub_proxy_sub_at(const char *frontend, const char *backend, int count, size_t size,
                         double *seconds, double *cpu_seconds, double *latencies, int samples) {
    struct pubsub ps;
    pubsub_open(&ps, frontend, backend);
    const char *topic = bench_topic;
    static char buffer[65536];

    char *body = calloc(1, size < 16 ? 16 : size);
    int every = samples > 0 ? count / samples : count + 1;
    int sampled = 0;
    double started = now(), cpu_started = process_cpu();
    int received = 0;
    // Publisher and subscriber interleave on one thread: send a batch, drain what arrived.
    for (int sent = 0; sent < count || received < count;) {
        for (int batch = 0; batch < 1000 && sent < count; batch++, sent++) {
            if (every && sent % every == 0) {
                double stamp = now();
                memcpy(body, &stamp, sizeof stamp);
            } else {
                memset(body, 0, sizeof(double));
            }
            zmq_send(ps.pub, topic, strlen(topic), ZMQ_SNDMORE);
            zmq_send(ps.pub, body, size, 0);
        }
        int more = 1;
        while (more) {
            int n = zmq_recv(ps.sub, buffer, sizeof buffer, sent < count ? ZMQ_DONTWAIT : 0);
            if (n < 0) break;
            int body_size = zmq_recv(ps.sub, buffer, sizeof buffer, 0);
            (void)body_size;
            double stamp;
            memcpy(&stamp, buffer, sizeof stamp);
            if (stamp > 0 && sampled < samples) latencies[sampled++] = (now() - stamp) * 1e6;
            received++;
            more = received < count;
        }
    }
    *seconds = now() - started;
    *cpu_seconds = process_cpu() - cpu_started;
    free(body);
    pubsub_close(&ps);
    return sampled == samples ? 0 : (samples > 0 && sampled > 0 ? 0 : -1);
}

int raw_pub_proxy_sub_latency(int count, size_t size, double *latencies) {
    return raw_pub_proxy_sub_latency_at(NULL, NULL, count, size, latencies);
}

int raw_pub_proxy_sub_latency_at(const char *frontend, const char *backend, int count, size_t size, double *latencies) {
    struct pubsub ps;
    pubsub_open(&ps, frontend, backend);
    static char buffer[65536];
    char *body = calloc(1, size < 16 ? 16 : size);
    int done = 0;
    for (; done < count; done++) {
        double started = now();
        zmq_send(ps.pub, bench_topic, strlen(bench_topic), ZMQ_SNDMORE);
        zmq_send(ps.pub, body, size, 0);
        if (zmq_recv(ps.sub, buffer, sizeof buffer, 0) < 0 || zmq_recv(ps.sub, buffer, sizeof buffer, 0) < 0) break;
        latencies[done] = (now() - started) * 1e6;
    }
    free(body);
    pubsub_close(&ps);
    return done == count ? 0 : -1;
}

int raw_pub_proxy_sub_paced_at(const char *frontend, const char *backend, int count, size_t size, double rate,
                               double *seconds) {
    struct pubsub ps;
    pubsub_open(&ps, frontend, backend);
    static char buffer[65536];
    char *body = calloc(1, size < 16 ? 16 : size);
    double interval = 1.0 / rate, started = now();
    int received = 0;
    for (int sent = 0; sent < count; sent++) {
        // Each message at its time, not in a burst: the proxy then wakes for messages one by one,
        // as it does for a node that makes activities current one after another. Waits by
        // draining the SUB (this process's CPU is not what the paced run measures).
        double due = started + sent * interval;
        do {
            while (zmq_recv(ps.sub, buffer, sizeof buffer, ZMQ_DONTWAIT) >= 0) {
                zmq_recv(ps.sub, buffer, sizeof buffer, 0);
                received++;
            }
        } while (now() < due);
        zmq_send(ps.pub, bench_topic, strlen(bench_topic), ZMQ_SNDMORE);
        zmq_send(ps.pub, body, size, 0);
    }
    while (received < count) {
        if (zmq_recv(ps.sub, buffer, sizeof buffer, 0) < 0) break;
        zmq_recv(ps.sub, buffer, sizeof buffer, 0);
        received++;
    }
    *seconds = now() - started;
    free(body);
    pubsub_close(&ps);
    return received == count ? 0 : -1;
}
