#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "peer_baselines.h"

#include <arpa/inet.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <nats/nats.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

// Linux has MSG_NOSIGNAL; Darwin has SO_NOSIGPIPE instead (set in tcp_socket).
#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0
#endif

enum {
    TIMEOUT_SECONDS = 10,
    TIMEOUT_MS = TIMEOUT_SECONDS * 1000,
    // hiredis writes its output buffer only when asked for a reply, so the Redis publisher writes it
    // itself every WRITE_BATCH bytes, like a client's write buffer, and leaves up to REPLY_LAG
    // PUBLISH replies unread, so that reading one almost never waits for the server.
    WRITE_BATCH = 64 * 1024,
    REPLY_LAG = 1024,
};

static const char ADVERTS[] = "handoff.bench.adverts";
static const char DATA[] = "handoff.bench.data";
static const char CREDIT[] = "handoff.bench.credit";
static const char NATS_DROPPED[] =
    " (a slow consumer? nats-server drops a subscriber more than max_pending bytes behind)";
static const char REDIS_DROPPED[] =
    " (redis-server drops a subscriber over client-output-buffer-limit pubsub; use \"pubsub 0 0 0\")";

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static const char *describe(int error, char *buffer, size_t size) {
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
    return strerror_r(error, buffer, size);
#else
    if (strerror_r(error, buffer, size) != 0) snprintf(buffer, size, "error %d", error);
    return buffer;
#endif
}

// MARK: One run: its connections and its first failure

// Slots: NATS and pub/sub use the first two of nats[] and redis[]; the Redis transfer all four.
enum { PUBLISHER = 0, SUBSCRIBER = 1, SENDER = 0, RECEIVER = 1, SENDER_CREDIT = 2, RECEIVER_CREDIT = 3 };

struct run {
    const char *function;
    atomic_int failed;
    // Opened before the threads start, so any thread may close them; freed by run_close.
    natsConnection *nats[2];
    natsSubscription *subscriptions[2];
    redisContext *redis[4];
    int sockets[3];
};

static void run_init(struct run *run, const char *function) {
    memset(run, 0, sizeof *run);
    run->function = function;
    atomic_init(&run->failed, 0);
    for (int i = 0; i < 3; i++) run->sockets[i] = -1;
}

// The first failure of a run prints its reason and closes every connection, which wakes the other
// thread out of a blocking call; later failures (usually that thread's own) stay quiet.
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 3, 4)))
#endif
static void fail(struct run *run, const char *who, const char *format, ...) {
    if (atomic_exchange(&run->failed, 1)) return;
    char message[512];
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(message, sizeof message, format, arguments);
    va_end(arguments);
    fprintf(stderr, "peer_baselines: %s: %s%s%s\n", run->function, who ? who : "", who ? ": " : "", message);
    for (int i = 0; i < 2; i++)
        if (run->nats[i]) natsConnection_Close(run->nats[i]);
    for (int i = 0; i < 4; i++)
        if (run->redis[i]) shutdown(run->redis[i]->fd, SHUT_RDWR);
    for (int i = 0; i < 3; i++)
        if (run->sockets[i] >= 0) shutdown(run->sockets[i], SHUT_RDWR);
}

static int failed(struct run *run) { return atomic_load(&run->failed); }

static void run_close(struct run *run) {
    for (int i = 0; i < 2; i++) {
        if (run->subscriptions[i]) natsSubscription_Destroy(run->subscriptions[i]);
        if (run->nats[i]) natsConnection_Destroy(run->nats[i]);
    }
    for (int i = 0; i < 4; i++)
        if (run->redis[i]) redisFree(run->redis[i]);
    for (int i = 0; i < 3; i++)
        if (run->sockets[i] >= 0) close(run->sockets[i]);
}

// Runs `first` and `second` on their own threads and joins both. Returns 0, or -1 if anything failed.
static int run_threads(struct run *run, void *(*first)(void *), void *(*second)(void *), void *argument) {
    pthread_t threads[2];
    void *(*bodies[2])(void *) = {first, second};
    int started = 0;
    for (; started < 2; started++) {
        int error = pthread_create(&threads[started], NULL, bodies[started], argument);
        if (error) {
            char text[128];
            fail(run, NULL, "pthread_create: %s", describe(error, text, sizeof text));
            break;
        }
    }
    for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
    return failed(run) ? -1 : 0;
}

// hiredis writes with write(), so a connection that the server (or fail) has closed raises SIGPIPE,
// which would end the process. (nats.c sets SIGPIPE to SIG_IGN for the whole process when it opens.)
// So the Redis functions block it in the calling thread, and so in the threads they start (where a
// pending one is discarded when the thread ends), and take any the calling thread raised before
// restoring its mask.
static void sigpipe_block(sigset_t *old) {
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, old);
}

static void sigpipe_restore(const sigset_t *old) {
    sigset_t pipe, pending;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    int taken;
    if (!sigismember(old, SIGPIPE) && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) sigwait(&pipe, &taken);
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

// MARK: NATS (nats.c)

// Says why a nats.c call failed, in the library's own words when this thread has them (without
// their "(file.c:line): " prefix).
static void nats_fail(struct run *run, const char *who, const char *operation, natsStatus status) {
    natsStatus last = NATS_OK;
    const char *text = nats_GetLastError(&last), *prefix_end;
    if (last != status || !text || !*text) text = natsStatus_GetText(status);
    if (text[0] == '(' && (prefix_end = strstr(text, "): "))) text = prefix_end + 3;
    fail(run, who, "%s: %s%s", operation, text,
         status == NATS_CONNECTION_CLOSED || status == NATS_SLOW_CONSUMER ? NATS_DROPPED : "");
}

// Connects to nats-server on 127.0.0.1:`port`, failing rather than reconnecting (which would lose
// messages quietly), with connects, flushes and socket writes bounded by the timeout. Publishes go
// through the library's write buffer and flusher thread (its throughput default) or, with
// `send_asap`, out at once. With a subject, also a synchronous subscription, registered with the
// server before this returns, without pending limits: past the defaults (65536 messages, 64 MiB)
// the library drops messages as a slow consumer, and each function bounds what can queue anyway
// (count messages, or window chunks).
static int nats_open(struct run *run, int slot, const char *who, int port, bool send_asap, const char *subject) {
    char url[64];
    snprintf(url, sizeof url, "nats://127.0.0.1:%d", port);
    natsOptions *options = NULL;
    natsStatus s = natsOptions_Create(&options);
    if (s == NATS_OK) s = natsOptions_SetURL(options, url);
    if (s == NATS_OK) s = natsOptions_SetTimeout(options, TIMEOUT_MS);
    if (s == NATS_OK) s = natsOptions_SetWriteDeadline(options, TIMEOUT_MS);
    if (s == NATS_OK) s = natsOptions_SetAllowReconnect(options, false);
    if (s == NATS_OK) s = natsOptions_SetSendAsap(options, send_asap);
    if (s == NATS_OK) s = natsConnection_Connect(&run->nats[slot], options);
    natsOptions_Destroy(options);
    if (s == NATS_OK && subject) {
        s = natsConnection_SubscribeSync(&run->subscriptions[slot], run->nats[slot], subject);
        if (s == NATS_OK) s = natsSubscription_SetPendingLimits(run->subscriptions[slot], -1, -1);
        if (s == NATS_OK) s = natsConnection_FlushTimeout(run->nats[slot], TIMEOUT_MS);
    }
    if (s == NATS_OK) return 0;
    char operation[64];
    snprintf(operation, sizeof operation, "connect to 127.0.0.1:%d", port);
    nats_fail(run, who, operation, s);
    return -1;
}

// Checks that `size`-byte messages fit the server's max_payload (and an int, which nats.c takes).
static int nats_fits(struct run *run, size_t size) {
    int64_t max_payload = natsConnection_GetMaxPayload(run->nats[PUBLISHER]);
    if ((uint64_t)size <= (uint64_t)max_payload) return 0;
    fail(run, NULL, "%zu-byte messages exceed the server's max_payload %lld", size, (long long)max_payload);
    return -1;
}

// The next message of a subscription, waiting at most the timeout; NULL (said) on failure.
static natsMsg *nats_next(struct run *run, const char *who, natsSubscription *subscription) {
    natsMsg *message = NULL;
    natsStatus s = natsSubscription_NextMsg(&message, subscription, TIMEOUT_MS);
    if (s == NATS_OK) return message;
    if (s == NATS_TIMEOUT) fail(run, who, "nothing received in %d s", TIMEOUT_SECONDS);
    else nats_fail(run, who, "receive", s);
    return NULL;
}

// MARK: Redis (hiredis)

// Says why a hiredis call failed.
static int redis_fail(struct run *run, const char *who, redisContext *c, const char *operation) {
    int timed_out = errno == EAGAIN || errno == EWOULDBLOCK;
    if (c->err == REDIS_ERR_IO && timed_out) fail(run, who, "%s: timed out after %d s", operation, TIMEOUT_SECONDS);
    else fail(run, who, "%s: %s%s", operation, c->errstr, c->err == REDIS_ERR_EOF ? REDIS_DROPPED : "");
    return -1;
}

// Connects to redis-server on 127.0.0.1:`port` (hiredis sets TCP_NODELAY), with send and receive
// timeouts; with a channel, subscribes and waits for the confirmation.
static int redis_open(struct run *run, int slot, const char *who, int port, const char *channel) {
    struct timeval timeout = {.tv_sec = TIMEOUT_SECONDS, .tv_usec = 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, timeout);
    if (!c || c->err) {
        fail(run, who, "connect to 127.0.0.1:%d: %s", port, c ? c->errstr : "out of memory");
        if (c) redisFree(c);
        return -1;
    }
    run->redis[slot] = c;  // only now: fail() shuts its socket down
    if (redisSetTimeout(c, timeout) != REDIS_OK) return redis_fail(run, who, c, "set timeouts");
    if (!channel) return 0;
    redisReply *reply = redisCommand(c, "SUBSCRIBE %s", channel);
    if (!reply) return redis_fail(run, who, c, "SUBSCRIBE");
    int subscribed = reply->type == REDIS_REPLY_ARRAY && reply->elements == 3 &&
                     reply->element[0]->type == REDIS_REPLY_STRING && strcmp(reply->element[0]->str, "subscribe") == 0;
    freeReplyObject(reply);
    if (subscribed) return 0;
    fail(run, who, "unexpected reply to SUBSCRIBE");
    return -1;
}

// Writes what hiredis has buffered now.
static int redis_flush(struct run *run, const char *who, redisContext *c) {
    int done = 0;
    while (!done)
        if (redisBufferWrite(c, &done) != REDIS_OK) return redis_fail(run, who, c, "send");
    return 0;
}

// Publishes `text` on `channel` now (its reply is read later, by redis_replies).
static int redis_publish_now(struct run *run, const char *who, redisContext *c, const char *channel, const char *text) {
    if (redisAppendCommand(c, "PUBLISH %s %s", channel, text) != REDIS_OK) return redis_fail(run, who, c, "PUBLISH");
    return redis_flush(run, who, c);
}

// The next pub/sub push, which must be a `message`; NULL (said) on failure. Its payload is
// reply->element[2]; the caller frees the reply.
static redisReply *redis_message(struct run *run, const char *who, redisContext *c) {
    redisReply *reply = NULL;
    if (redisGetReply(c, (void **)&reply) != REDIS_OK) {
        redis_fail(run, who, c, "receive");
        return NULL;
    }
    if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 3 && reply->element[0]->type == REDIS_REPLY_STRING &&
        strcmp(reply->element[0]->str, "message") == 0 && reply->element[2]->type == REDIS_REPLY_STRING)
        return reply;
    fail(run, who, "unexpected push from redis-server");
    freeReplyObject(reply);
    return NULL;
}

// Reads PUBLISH replies until at most `lag` of the `published` are unread (`*replies` read); each
// must say that a subscriber got the message.
static int redis_replies(struct run *run, const char *who, redisContext *c, uint64_t *replies, uint64_t published,
                         uint64_t lag) {
    while (published - *replies > lag) {
        redisReply *reply = NULL;
        if (redisGetReply(c, (void **)&reply) != REDIS_OK) return redis_fail(run, who, c, "PUBLISH");
        int ok = reply->type == REDIS_REPLY_INTEGER && reply->integer >= 1;
        if (reply->type == REDIS_REPLY_ERROR) fail(run, who, "redis-server: %.200s", reply->str);
        else if (!ok) fail(run, who, "PUBLISH reached no subscriber%s", REDIS_DROPPED);
        freeReplyObject(reply);
        if (!ok) return -1;
        ++*replies;
    }
    return 0;
}

// MARK: Pub/sub (NATS and Redis)

struct pubsub {
    struct run run;
    int count, samples, every, sampled;
    size_t size;
    double *latencies;
    double started, finished;
};

// Zeroes `p`, checks the arguments and records them; -1 (with the reason said) when they are wrong.
static int pubsub_init(struct pubsub *p, const char *function, int port, int count, size_t size, double *seconds,
                       double *latencies, int samples) {
    memset(p, 0, sizeof *p);
    run_init(&p->run, function);
    if (port <= 0 || port > 65535) fail(&p->run, NULL, "bad port %d", port);
    else if (count <= 0) fail(&p->run, NULL, "count must be positive");
    else if (!seconds) fail(&p->run, NULL, "seconds is NULL");
    else if (samples < 0 || samples > count) fail(&p->run, NULL, "samples must be in 0...count");
    else if (samples > 0 && (!latencies || size < sizeof(double)))
        fail(&p->run, NULL, "sampling latencies needs a latencies buffer and size >= 8");
    if (failed(&p->run)) return -1;
    p->count = count;
    p->size = size;
    p->samples = samples;
    p->every = samples > 0 ? count / samples : 0;
    p->latencies = latencies;
    return 0;
}

// A zeroed message body; NULL (said) when out of memory.
static char *pubsub_body(struct pubsub *p) {
    char *body = calloc(1, p->size ? p->size : 1);
    if (!body) fail(&p->run, "publisher", "out of memory");
    return body;
}

// Puts in the body of message `index` its send time if it is a sample, otherwise 0.
static void pubsub_stamp(struct pubsub *p, char *body, int index) {
    double stamp = p->every && index % p->every == 0 && index / p->every < p->samples ? now() : 0;
    if (p->size >= sizeof stamp) memcpy(body, &stamp, sizeof stamp);
}

// Called by the subscriber for every message: checks the size, records the latency of samples.
static int pubsub_received(struct pubsub *p, int index, const void *data, size_t size) {
    if (size != p->size) {
        fail(&p->run, "subscriber", "message %d has %zu bytes, expected %zu", index, size, p->size);
        return -1;
    }
    double stamp = 0;
    if (size >= sizeof stamp) memcpy(&stamp, data, sizeof stamp);
    if (stamp > 0 && p->sampled < p->samples) p->latencies[p->sampled++] = (now() - stamp) * 1e6;
    return 0;
}

static int pubsub_finish(struct pubsub *p, int status, double *seconds) {
    if (status == 0 && p->sampled != p->samples) {
        fail(&p->run, NULL, "got %d latency samples of %d", p->sampled, p->samples);
        status = -1;
    }
    if (status == 0) *seconds = p->finished - p->started;
    run_close(&p->run);
    return status;
}

static void *nats_publish(void *raw) {
    struct pubsub *p = raw;
    natsConnection *nc = p->run.nats[PUBLISHER];
    char *body = pubsub_body(p);
    natsStatus s = NATS_OK;
    p->started = now();
    for (int i = 0; body && s == NATS_OK && i < p->count; i++) {
        pubsub_stamp(p, body, i);
        s = natsConnection_Publish(nc, ADVERTS, body, (int)p->size);
    }
    // The round trip (PING/PONG) confirms that the server took every message.
    if (body && s == NATS_OK) s = natsConnection_FlushTimeout(nc, TIMEOUT_MS);
    if (s != NATS_OK) nats_fail(&p->run, "publisher", "publish", s);
    free(body);
    nats_ReleaseThreadMemory();
    return NULL;
}

static void *nats_subscribe(void *raw) {
    struct pubsub *p = raw;
    int i = 0;
    for (; i < p->count; i++) {
        natsMsg *message = nats_next(&p->run, "subscriber", p->run.subscriptions[SUBSCRIBER]);
        if (!message) break;
        int bad = pubsub_received(p, i, natsMsg_GetData(message), (size_t)natsMsg_GetDataLength(message));
        natsMsg_Destroy(message);
        if (bad) break;
    }
    if (i == p->count) p->finished = now();
    nats_ReleaseThreadMemory();
    return NULL;
}

int nats_pubsub(int port, int count, size_t size, double *seconds, double *latencies, int samples) {
    struct pubsub p;
    if (pubsub_init(&p, "nats_pubsub", port, count, size, seconds, latencies, samples)) return -1;
    int status = -1;
    if (nats_open(&p.run, SUBSCRIBER, "subscriber", port, false, ADVERTS) == 0 &&
        nats_open(&p.run, PUBLISHER, "publisher", port, false, NULL) == 0 && nats_fits(&p.run, size) == 0)
        status = run_threads(&p.run, nats_publish, nats_subscribe, &p);
    return pubsub_finish(&p, status, seconds);
}

static void *redis_publish(void *raw) {
    struct pubsub *p = raw;
    redisContext *c = p->run.redis[PUBLISHER];
    char *body = pubsub_body(p);
    uint64_t replies = 0;
    size_t batched = 0;
    p->started = now();
    for (int i = 0; body && i < p->count; i++) {
        pubsub_stamp(p, body, i);
        if (redisAppendCommand(c, "PUBLISH %s %b", ADVERTS, body, p->size) != REDIS_OK) {
            redis_fail(&p->run, "publisher", c, "PUBLISH");
            break;
        }
        batched += p->size;
        if (batched >= WRITE_BATCH) {
            batched = 0;
            if (redis_flush(&p->run, "publisher", c)) break;
        }
        if (redis_replies(&p->run, "publisher", c, &replies, (uint64_t)i + 1, REPLY_LAG)) break;
    }
    if (body && !failed(&p->run)) redis_replies(&p->run, "publisher", c, &replies, (uint64_t)p->count, 0);
    free(body);
    return NULL;
}

static void *redis_subscribe(void *raw) {
    struct pubsub *p = raw;
    int i = 0;
    for (; i < p->count; i++) {
        redisReply *reply = redis_message(&p->run, "subscriber", p->run.redis[SUBSCRIBER]);
        if (!reply) break;
        int bad = pubsub_received(p, i, reply->element[2]->str, reply->element[2]->len);
        freeReplyObject(reply);
        if (bad) break;
    }
    if (i == p->count) p->finished = now();
    return NULL;
}

int redis_pubsub(int port, int count, size_t size, double *seconds, double *latencies, int samples) {
    struct pubsub p;
    if (pubsub_init(&p, "redis_pubsub", port, count, size, seconds, latencies, samples)) return -1;
    sigset_t mask;
    sigpipe_block(&mask);
    int status = -1;
    if (redis_open(&p.run, SUBSCRIBER, "subscriber", port, ADVERTS) == 0 &&
        redis_open(&p.run, PUBLISHER, "publisher", port, NULL) == 0)
        status = run_threads(&p.run, redis_publish, redis_subscribe, &p);
    status = pubsub_finish(&p, status, seconds);
    sigpipe_restore(&mask);
    return status;
}

// MARK: Credit-based transfers (NATS and Redis)

struct transfer {
    struct run run;
    uint64_t total, chunks;
    size_t chunk;
    int window;
    double started, finished;
};

static int transfer_init(struct transfer *t, const char *function, int port, uint64_t total, size_t chunk,
                         int window) {
    memset(t, 0, sizeof *t);
    run_init(&t->run, function);
    if (port <= 0 || port > 65535) fail(&t->run, NULL, "bad port %d", port);
    else if (total == 0) fail(&t->run, NULL, "total must be positive");
    else if (chunk == 0) fail(&t->run, NULL, "chunk must be positive");
    else if (window <= 0) fail(&t->run, NULL, "window must be positive");
    if (failed(&t->run)) return -1;
    t->total = total;
    t->chunk = chunk;
    t->window = window;
    t->chunks = total / chunk + (total % chunk != 0);
    return 0;
}

// The chunk the sender sends, all 0x5A; NULL (said) when out of memory.
static char *transfer_data(struct transfer *t) {
    char *data = malloc(t->chunk);
    if (data) memset(data, 0x5A, t->chunk);
    else fail(&t->run, "sender", "out of memory");
    return data;
}

// The size of chunk `index`: the last may be shorter.
static size_t transfer_size(struct transfer *t, uint64_t index) {
    uint64_t left = t->total - index * t->chunk;
    return left < t->chunk ? (size_t)left : t->chunk;
}

// Counts a received chunk of `size` bytes; -1 (said) for an empty chunk or more bytes than were sent.
static int transfer_received(struct transfer *t, uint64_t *received, size_t size) {
    *received += size;
    if (size == 0 || *received > t->total) {
        fail(&t->run, "receiver", "received %llu bytes, more than the %llu sent", (unsigned long long)*received,
             (unsigned long long)t->total);
        return -1;
    }
    return 0;
}

// Adds a credit grant (a decimal number of chunks) to `*credit`; -1 (said) when it is malformed.
static int transfer_grant(struct transfer *t, const char *text, size_t length, uint64_t *credit) {
    uint64_t granted = 0;
    int valid = length > 0 && length <= 18;
    for (size_t i = 0; valid && i < length; i++) {
        valid = text[i] >= '0' && text[i] <= '9';
        granted = granted * 10 + (uint64_t)(text[i] - '0');
    }
    if (!valid) {
        fail(&t->run, "sender", "malformed credit message");
        return -1;
    }
    *credit += granted;
    return 0;
}

// The first grant: `window` chunks, or all of them if fewer, as decimal text in `digits`.
static uint64_t transfer_first_grant(struct transfer *t, char *digits, size_t capacity) {
    uint64_t granted = (uint64_t)t->window < t->chunks ? (uint64_t)t->window : t->chunks;
    snprintf(digits, capacity, "%llu", (unsigned long long)granted);
    return granted;
}

static double transfer_finish(struct transfer *t, int status) {
    run_close(&t->run);
    return status == 0 ? t->finished - t->started : -1;
}

static void *nats_send(void *raw) {
    struct transfer *t = raw;
    natsConnection *nc = t->run.nats[SENDER];
    char *data = transfer_data(t);
    uint64_t credit = 0;
    natsStatus s = NATS_OK;
    for (uint64_t sent = 0; data && s == NATS_OK && sent < t->chunks; sent++) {
        while (credit == 0) {
            natsMsg *grant = nats_next(&t->run, "sender", t->run.subscriptions[SENDER]);
            if (!grant) goto done;
            int bad = transfer_grant(t, natsMsg_GetData(grant), (size_t)natsMsg_GetDataLength(grant), &credit);
            natsMsg_Destroy(grant);
            if (bad) goto done;
        }
        s = natsConnection_Publish(nc, DATA, data, (int)transfer_size(t, sent));
        credit--;
    }
    // The round trip confirms that the server took every chunk.
    if (data && s == NATS_OK) s = natsConnection_FlushTimeout(nc, TIMEOUT_MS);
    if (s != NATS_OK) nats_fail(&t->run, "sender", "publish", s);
done:
    free(data);
    nats_ReleaseThreadMemory();
    return NULL;
}

static void *nats_receive(void *raw) {
    struct transfer *t = raw;
    natsConnection *nc = t->run.nats[RECEIVER];
    char digits[24];
    t->started = now();
    uint64_t granted = transfer_first_grant(t, digits, sizeof digits), received = 0;
    natsStatus s = natsConnection_PublishString(nc, CREDIT, digits);
    while (s == NATS_OK && received < t->total) {
        natsMsg *chunk = nats_next(&t->run, "receiver", t->run.subscriptions[RECEIVER]);
        if (!chunk) break;
        size_t size = (size_t)natsMsg_GetDataLength(chunk);
        natsMsg_Destroy(chunk);
        if (transfer_received(t, &received, size)) break;
        if (granted < t->chunks) {
            s = natsConnection_PublishString(nc, CREDIT, "1");
            granted++;
        }
    }
    if (s != NATS_OK) nats_fail(&t->run, "receiver", "publish credit", s);
    else if (received == t->total) t->finished = now();
    nats_ReleaseThreadMemory();
    return NULL;
}

double nats_transfer(int port, uint64_t total, size_t chunk, int window) {
    struct transfer t;
    if (transfer_init(&t, "nats_transfer", port, total, chunk, window)) return -1;
    // One connection a side: the sender's publishes data and takes credit, the receiver's the reverse.
    // Both send at once: through the library's buffer, the end of a chunk or a grant would wait for
    // its flusher thread (about 1 ms) whenever the other side waits for it, as it does with a small window.
    int status = -1;
    if (nats_open(&t.run, RECEIVER, "receiver", port, true, DATA) == 0 &&
        nats_open(&t.run, SENDER, "sender", port, true, CREDIT) == 0 && nats_fits(&t.run, chunk) == 0)
        status = run_threads(&t.run, nats_send, nats_receive, &t);
    return transfer_finish(&t, status);
}

static void *redis_send(void *raw) {
    struct transfer *t = raw;
    redisContext *out = t->run.redis[SENDER], *credits = t->run.redis[SENDER_CREDIT];
    char *data = transfer_data(t);
    uint64_t credit = 0, replies = 0, sent = 0;
    for (; data && sent < t->chunks; sent++) {
        while (credit == 0) {
            redisReply *grant = redis_message(&t->run, "sender", credits);
            if (!grant) goto done;
            int bad = transfer_grant(t, grant->element[2]->str, grant->element[2]->len, &credit);
            freeReplyObject(grant);
            if (bad) goto done;
        }
        if (redisAppendCommand(out, "PUBLISH %s %b", DATA, data, transfer_size(t, sent)) != REDIS_OK) {
            redis_fail(&t->run, "sender", out, "PUBLISH");
            goto done;
        }
        if (redis_flush(&t->run, "sender", out) ||
            redis_replies(&t->run, "sender", out, &replies, sent + 1, (uint64_t)t->window))
            goto done;
        credit--;
    }
    redis_replies(&t->run, "sender", out, &replies, sent, 0);
done:
    free(data);
    return NULL;
}

static void *redis_receive(void *raw) {
    struct transfer *t = raw;
    redisContext *in = t->run.redis[RECEIVER], *credits = t->run.redis[RECEIVER_CREDIT];
    char digits[24];
    t->started = now();
    uint64_t granted = transfer_first_grant(t, digits, sizeof digits), grants = 1, replies = 0, received = 0;
    if (redis_publish_now(&t->run, "receiver", credits, CREDIT, digits)) return NULL;
    while (received < t->total) {
        redisReply *chunk = redis_message(&t->run, "receiver", in);
        if (!chunk) return NULL;
        size_t size = chunk->element[2]->len;
        freeReplyObject(chunk);
        if (transfer_received(t, &received, size)) return NULL;
        if (granted < t->chunks) {
            if (redis_publish_now(&t->run, "receiver", credits, CREDIT, "1")) return NULL;
            granted++;
            grants++;
        }
        if (redis_replies(&t->run, "receiver", credits, &replies, grants, (uint64_t)t->window)) return NULL;
    }
    t->finished = now();
    redis_replies(&t->run, "receiver", credits, &replies, grants, 0);
    return NULL;
}

double redis_transfer(int port, uint64_t total, size_t chunk, int window) {
    struct transfer t;
    if (transfer_init(&t, "redis_transfer", port, total, chunk, window)) return -1;
    sigset_t mask;
    sigpipe_block(&mask);
    // RESP2 pub/sub takes a connection over: each side subscribes on one and publishes on another.
    int status = -1;
    if (redis_open(&t.run, RECEIVER, "receiver", port, DATA) == 0 &&
        redis_open(&t.run, SENDER_CREDIT, "sender (credit)", port, CREDIT) == 0 &&
        redis_open(&t.run, RECEIVER_CREDIT, "receiver (credit)", port, NULL) == 0 &&
        redis_open(&t.run, SENDER, "sender", port, NULL) == 0)
        status = run_threads(&t.run, redis_send, redis_receive, &t);
    double seconds = transfer_finish(&t, status);
    sigpipe_restore(&mask);
    return seconds;
}

// MARK: Plain TCP

struct tcp {
    struct run run;  // sockets: listener, sender, receiver
    uint64_t total;
    size_t chunk;
    double started, finished;
};

static void io_error(struct run *run, const char *who, const char *operation, int error) {
    char text[128];
    if (error == EAGAIN || error == EWOULDBLOCK) {
        fail(run, who, "%s timed out after %d s", operation, TIMEOUT_SECONDS);
    } else if (error == EPIPE || error == ECONNRESET) {
        fail(run, who, "%s: connection closed by the peer (%s)", operation, describe(error, text, sizeof text));
    } else {
        fail(run, who, "%s: %s", operation, describe(error, text, sizeof text));
    }
}

// TCP_NODELAY, 10 s send and receive timeouts, no SIGPIPE.
static void tcp_configure(int fd) {
    int one = 1;
    struct timeval timeout = {.tv_sec = TIMEOUT_SECONDS, .tv_usec = 0};
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
#ifdef SO_NOSIGPIPE
    setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
}

// A new TCP socket in the run's slot `slot`; -1 (said) on failure.
static int tcp_socket(struct run *run, int slot, const char *who) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        char text[128];
        fail(run, who, "socket: %s", describe(errno, text, sizeof text));
        return -1;
    }
    run->sockets[slot] = fd;
    tcp_configure(fd);
    return fd;
}

static void *tcp_send(void *raw) {
    struct tcp *t = raw;
    char *data = malloc(t->chunk);
    if (!data) {
        fail(&t->run, "sender", "out of memory");
        return NULL;
    }
    memset(data, 0x5A, t->chunk);
    t->started = now();
    for (uint64_t sent = 0; sent < t->total;) {
        size_t n = t->total - sent < t->chunk ? (size_t)(t->total - sent) : t->chunk;
        ssize_t written = send(t->run.sockets[1], data, n, MSG_NOSIGNAL);
        if (written < 0 && errno == EINTR) continue;
        if (written < 0) {
            io_error(&t->run, "sender", "send", errno);
            break;
        }
        sent += (uint64_t)written;
    }
    free(data);
    return NULL;
}

static void *tcp_receive(void *raw) {
    struct tcp *t = raw;
    char *data = malloc(t->chunk);
    if (!data) {
        fail(&t->run, "receiver", "out of memory");
        return NULL;
    }
    uint64_t received = 0;
    while (received < t->total) {
        ssize_t n = recv(t->run.sockets[2], data, t->chunk, 0);
        if (n > 0) {
            received += (uint64_t)n;
        } else if (n == 0) {
            fail(&t->run, "receiver", "connection closed after %llu of %llu bytes", (unsigned long long)received,
                 (unsigned long long)t->total);
            break;
        } else if (errno != EINTR) {
            io_error(&t->run, "receiver", "receive", errno);
            break;
        }
    }
    if (received == t->total) t->finished = now();
    free(data);
    return NULL;
}

double tcp_transfer(uint64_t total, size_t chunk) {
    struct tcp t;
    memset(&t, 0, sizeof t);
    run_init(&t.run, "tcp_transfer");
    t.total = total;
    t.chunk = chunk;
    if (total == 0 || chunk == 0) {
        fail(&t.run, NULL, "total and chunk must be positive");
        return -1;
    }
    char text[128];
    int status = -1;
    struct sockaddr_in address;
    socklen_t length = sizeof address;
    memset(&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_port = 0;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int listener = tcp_socket(&t.run, 0, "listener");
    if (listener < 0) goto done;
    if (bind(listener, (struct sockaddr *)&address, sizeof address) != 0 || listen(listener, 1) != 0 ||
        getsockname(listener, (struct sockaddr *)&address, &length) != 0) {
        fail(&t.run, "listener", "bind/listen on 127.0.0.1: %s", describe(errno, text, sizeof text));
        goto done;
    }
    int sender = tcp_socket(&t.run, 1, "sender");
    if (sender < 0) goto done;
    if (connect(sender, (struct sockaddr *)&address, sizeof address) != 0) {
        fail(&t.run, "sender", "connect to 127.0.0.1:%d: %s", ntohs(address.sin_port), describe(errno, text, sizeof text));
        goto done;
    }
    t.run.sockets[2] = accept(listener, NULL, NULL);  // bounded by the listener's receive timeout
    if (t.run.sockets[2] < 0) {
        fail(&t.run, "listener", "accept: %s", describe(errno, text, sizeof text));
        goto done;
    }
    tcp_configure(t.run.sockets[2]);
    status = run_threads(&t.run, tcp_send, tcp_receive, &t);
done:
    run_close(&t.run);
    return status == 0 ? t.finished - t.started : -1;
}
