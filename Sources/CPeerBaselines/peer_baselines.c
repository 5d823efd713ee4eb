#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "peer_baselines.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

// Linux has MSG_NOSIGNAL; Darwin has SO_NOSIGPIPE instead (set in configure_socket).
#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0
#endif

enum {
    IO_TIMEOUT_SECONDS = 10,
    WRITE_BUFFER = 64 * 1024,  // the publishers' user-space write buffer
    READ_BUFFER = 256 * 1024,  // every connection's user-space read buffer
    MAX_SOCKETS = 8,
};

static const char NATS_CONNECT[] = "CONNECT {\"verbose\":false,\"pedantic\":false}\r\n";
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

// MARK: One run: its sockets and its first failure

struct run {
    const char *function;
    atomic_int failed;
    int sockets[MAX_SOCKETS];  // registered before the threads start, so any thread may shut them down
    int socket_count;
};

static void run_init(struct run *run, const char *function) {
    run->function = function;
    atomic_init(&run->failed, 0);
    run->socket_count = 0;
}

// The first failure of a run prints its reason and shuts every socket down, which wakes the other
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
    for (int i = 0; i < run->socket_count; i++) shutdown(run->sockets[i], SHUT_RDWR);
}

static int failed(struct run *run) { return atomic_load(&run->failed); }

static int io_error(struct run *run, const char *who, const char *operation, int error) {
    char text[128];
    if (error == EAGAIN || error == EWOULDBLOCK) {
        fail(run, who, "%s timed out after %d s", operation, IO_TIMEOUT_SECONDS);
    } else if (error == EPIPE || error == ECONNRESET) {
        fail(run, who, "%s: connection closed by the peer (%s)", operation, describe(error, text, sizeof text));
    } else {
        fail(run, who, "%s: %s", operation, describe(error, text, sizeof text));
    }
    return -1;
}

// A new TCP socket, registered with the run, with the options every connection gets.
static int open_socket(struct run *run, const char *who) {
    char text[128];
    if (run->socket_count == MAX_SOCKETS) {
        fail(run, who, "too many sockets");
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        fail(run, who, "socket: %s", describe(errno, text, sizeof text));
        return -1;
    }
    run->sockets[run->socket_count++] = fd;
    int one = 1;
    struct timeval timeout = {.tv_sec = IO_TIMEOUT_SECONDS, .tv_usec = 0};
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
#ifdef SO_NOSIGPIPE
    setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
    return fd;
}

static void close_sockets(struct run *run) {
    for (int i = 0; i < run->socket_count; i++) close(run->sockets[i]);
    run->socket_count = 0;
}

// Sends every byte of `iov` (modified in place), one sendmsg per partial write.
static int send_iov(struct run *run, const char *who, int fd, struct iovec *iov, int count) {
    while (count > 0 && iov->iov_len == 0) {
        iov++;
        count--;
    }
    while (count > 0) {
        struct msghdr message;
        memset(&message, 0, sizeof message);
        message.msg_iov = iov;
        message.msg_iovlen = (size_t)count;
        ssize_t n = sendmsg(fd, &message, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            return io_error(run, who, "send", errno);
        }
        size_t left = (size_t)n;
        while (count > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            count--;
        }
        if (count > 0) {
            iov->iov_base = (char *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return 0;
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

// MARK: A buffered connection to a server on 127.0.0.1

struct conn {
    struct run *run;
    const char *who;
    const char *closed_hint;  // appended when the server closes the connection
    int fd;
    char *in;
    size_t in_capacity, in_start, in_end;
    char *out;
    size_t out_capacity, out_length;
};

static int conn_open(struct conn *c, struct run *run, const char *who, int port) {
    memset(c, 0, sizeof *c);
    c->run = run;
    c->who = who;
    c->fd = -1;
    c->in_capacity = READ_BUFFER;
    c->out_capacity = WRITE_BUFFER;
    c->in = malloc(c->in_capacity);
    c->out = malloc(c->out_capacity);
    if (!c->in || !c->out) {
        fail(run, who, "out of memory");
        return -1;
    }
    c->fd = open_socket(run, who);
    if (c->fd < 0) return -1;
    struct sockaddr_in address;
    memset(&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_port = htons((uint16_t)port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(c->fd, (struct sockaddr *)&address, sizeof address) != 0) {
        char text[128];
        fail(run, who, "connect to 127.0.0.1:%d: %s", port, describe(errno, text, sizeof text));
        return -1;
    }
    return 0;
}

// Frees the buffers; the socket is closed with the run's others (close_sockets).
static void conn_free(struct conn *c) {
    free(c->in);
    free(c->out);
    c->in = c->out = NULL;
}

static int conn_flush(struct conn *c) {
    if (c->out_length == 0) return 0;
    struct iovec iov = {.iov_base = c->out, .iov_len = c->out_length};
    c->out_length = 0;
    return send_iov(c->run, c->who, c->fd, &iov, 1);
}

// Appends to the write buffer, flushing it when full; a block at least as large as the buffer goes
// out together with what is buffered, in one sendmsg, without a copy.
static int conn_put(struct conn *c, const void *data, size_t size) {
    if (c->out_length + size <= c->out_capacity) {
        memcpy(c->out + c->out_length, data, size);
        c->out_length += size;
        return 0;
    }
    if (size < c->out_capacity) {
        if (conn_flush(c)) return -1;
        memcpy(c->out, data, size);
        c->out_length = size;
        return 0;
    }
    struct iovec iov[2] = {{.iov_base = c->out, .iov_len = c->out_length}, {.iov_base = (void *)data, .iov_len = size}};
    c->out_length = 0;
    return send_iov(c->run, c->who, c->fd, iov, 2);
}

static int conn_put_string(struct conn *c, const char *text) { return conn_put(c, text, strlen(text)); }

// Reads more into the read buffer (blocking, bounded by the receive timeout).
static int conn_fill(struct conn *c) {
    if (c->in_start == c->in_end) {
        c->in_start = c->in_end = 0;
    } else if (c->in_end == c->in_capacity && c->in_start > 0) {
        memmove(c->in, c->in + c->in_start, c->in_end - c->in_start);
        c->in_end -= c->in_start;
        c->in_start = 0;
    }
    if (c->in_end == c->in_capacity) {
        fail(c->run, c->who, "protocol line longer than %d bytes", READ_BUFFER);
        return -1;
    }
    for (;;) {
        ssize_t n = recv(c->fd, c->in + c->in_end, c->in_capacity - c->in_end, 0);
        if (n > 0) {
            c->in_end += (size_t)n;
            return 0;
        }
        if (n == 0) {
            fail(c->run, c->who, "connection closed by the server%s", c->closed_hint ? c->closed_hint : "");
            return -1;
        }
        if (errno == EINTR) continue;
        return io_error(c->run, c->who, "receive", errno);
    }
}

// The next line without its CR LF, NUL-terminated in the read buffer (valid until the next read).
static char *conn_line(struct conn *c, size_t *length) {
    size_t scanned = 0;  // bytes after in_start known to hold no newline
    for (;;) {
        char *newline = memchr(c->in + c->in_start + scanned, '\n', c->in_end - c->in_start - scanned);
        if (newline) {
            char *line = c->in + c->in_start;
            size_t n = (size_t)(newline - line);
            if (n > 0 && line[n - 1] == '\r') n--;
            line[n] = '\0';
            c->in_start = (size_t)(newline - c->in) + 1;
            *length = n;
            return line;
        }
        scanned = c->in_end - c->in_start;
        if (conn_fill(c)) return NULL;
    }
}

// Consumes `size` bytes, copying the first `capacity` of them to `destination` (which may be NULL).
static int conn_take(struct conn *c, void *destination, size_t capacity, size_t size) {
    size_t copied = 0;
    while (size > 0) {
        if (c->in_start == c->in_end && conn_fill(c)) return -1;
        size_t available = c->in_end - c->in_start;
        size_t take = available < size ? available : size;
        if (copied < capacity) {
            size_t n = capacity - copied < take ? capacity - copied : take;
            memcpy((char *)destination + copied, c->in + c->in_start, n);
            copied += n;
        }
        c->in_start += take;
        size -= take;
    }
    return 0;
}

static int conn_crlf(struct conn *c) {
    char end[2];
    if (conn_take(c, end, 2, 2)) return -1;
    if (end[0] != '\r' || end[1] != '\n') {
        fail(c->run, c->who, "protocol error: payload not followed by CR LF");
        return -1;
    }
    return 0;
}

// Whether a read would not block: buffered bytes, or the socket is readable (or closed).
static int conn_readable(struct conn *c) {
    if (c->in_end > c->in_start) return 1;
    struct pollfd item = {.fd = c->fd, .events = POLLIN, .revents = 0};
    return poll(&item, 1, 0) > 0;
}

static int parse_size(const char *text, uint64_t *value) {
    if (*text < '0' || *text > '9') return -1;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(text, &end, 10);
    if (errno || *end != '\0') return -1;
    *value = (uint64_t)n;
    return 0;
}

// MARK: NATS

// Handles one protocol line that is not a MSG. Counts PONGs in `pongs` (if not NULL).
static int nats_control(struct conn *c, const char *line, int *pongs) {
    if (strcmp(line, "PING") == 0) return conn_put_string(c, "PONG\r\n") || conn_flush(c) ? -1 : 0;
    if (strcmp(line, "PONG") == 0) {
        if (pongs) ++*pongs;
        return 0;
    }
    if (strcmp(line, "+OK") == 0 || strncmp(line, "INFO ", 5) == 0) return 0;
    if (strncmp(line, "-ERR", 4) == 0) {
        fail(c->run, c->who, "nats-server: %.200s", line);
        return -1;
    }
    fail(c->run, c->who, "unexpected from nats-server: %.80s", line);
    return -1;
}

// Reads one protocol message. A MSG's payload goes to `destination` (its first `capacity` bytes;
// the rest is consumed), its size to `size`, and the result is 1; anything else is handled and the
// result is 0. -1 on failure.
static int nats_step(struct conn *c, void *destination, size_t capacity, size_t *size, int *pongs) {
    size_t length;
    char *line = conn_line(c, &length);
    if (!line) return -1;
    if (strncmp(line, "MSG ", 4) != 0) return nats_control(c, line, pongs) ? -1 : 0;
    // MSG <subject> <sid> [reply-to] <#bytes>
    const char *space = strrchr(line, ' ');
    uint64_t bytes;
    if (parse_size(space + 1, &bytes)) {
        fail(c->run, c->who, "malformed MSG line: %.80s", line);
        return -1;
    }
    *size = (size_t)bytes;
    if (conn_take(c, destination, capacity, (size_t)bytes) || conn_crlf(c)) return -1;
    return 1;
}

// Sends PING and handles what comes until the PONG: once it arrives, the server has processed
// everything sent before it. MSGs arriving meanwhile are discarded.
static int nats_sync(struct conn *c) {
    if (conn_put_string(c, "PING\r\n") || conn_flush(c)) return -1;
    int pongs = 0;
    while (pongs == 0) {
        size_t size;
        if (nats_step(c, NULL, 0, &size, &pongs) < 0) return -1;
    }
    return 0;
}

// Connects, reads INFO (for max_payload), sends CONNECT and, if `subject` is not NULL, SUB, and
// waits for the PONG that says the server has registered them.
static int nats_open(struct conn *c, struct run *run, const char *who, int port, const char *subject,
                     int64_t *max_payload) {
    if (conn_open(c, run, who, port)) return -1;
    c->closed_hint = NATS_DROPPED;
    size_t length;
    char *info = conn_line(c, &length);
    if (!info) return -1;
    if (strncmp(info, "INFO ", 5) != 0) {
        fail(run, who, "not a NATS server on port %d (greeting: %.40s)", port, info);
        return -1;
    }
    const char *field = strstr(info, "\"max_payload\":");
    if (field) *max_payload = strtoll(field + strlen("\"max_payload\":"), NULL, 10);
    if (conn_put_string(c, NATS_CONNECT)) return -1;
    if (subject) {
        char sub[128];
        snprintf(sub, sizeof sub, "SUB %s 1\r\n", subject);
        if (conn_put_string(c, sub)) return -1;
    }
    return nats_sync(c);
}

// Handles whatever has arrived without blocking for more (PINGs, errors, and MSGs, which are
// counted as credit: their payload is a decimal number of chunks).
static int nats_poll(struct conn *c, uint64_t *credit) {
    while (conn_readable(c)) {
        char text[24] = {0};
        size_t size;
        int result = nats_step(c, text, sizeof text - 1, &size, NULL);
        if (result < 0) return -1;
        if (result == 1) {
            uint64_t granted;
            if (!credit || size >= sizeof text || parse_size(text, &granted)) {
                fail(c->run, c->who, "unexpected message");
                return -1;
            }
            *credit += granted;
        }
    }
    return 0;
}

// MARK: Pub/sub (NATS and Redis)

struct pubsub {
    struct run run;
    struct conn publisher, subscriber;
    int count, samples, every, sampled;
    size_t size;
    double *latencies;
    double started, finished;
};

static int pubsub_check(struct run *run, int port, int count, size_t size, double *seconds, double *latencies,
                        int samples) {
    if (port <= 0 || port > 65535) fail(run, NULL, "bad port %d", port);
    else if (count <= 0) fail(run, NULL, "count must be positive");
    else if (!seconds) fail(run, NULL, "seconds is NULL");
    else if (samples < 0 || samples > count) fail(run, NULL, "samples must be in 0...count");
    else if (samples > 0 && (!latencies || size < sizeof(double)))
        fail(run, NULL, "sampling latencies needs a latencies buffer and size >= 8");
    return failed(run) ? -1 : 0;
}

// The send time for message `index`, or 0 if it is not a sample.
/// Zeroes `p`, checks the arguments and records them; -1 (with the reason said) when they are wrong.
static int pubsub_init(struct pubsub *p, const char *function, int port, int count, size_t size, double *seconds,
                       double *latencies, int samples) {
    memset(p, 0, sizeof *p);
    run_init(&p->run, function);
    if (pubsub_check(&p->run, port, count, size, seconds, latencies, samples)) return -1;
    p->count = count;
    p->size = size;
    p->samples = samples;
    p->every = samples > 0 ? count / samples : 0;
    p->latencies = latencies;
    return 0;
}

static double pubsub_stamp(struct pubsub *p, int index) {
    return p->every && index % p->every == 0 && index / p->every < p->samples ? now() : 0;
}

// Called by the subscriber for every message: checks the size, records the latency of samples.
static int pubsub_received(struct pubsub *p, int index, size_t size, double stamp) {
    if (size != p->size) {
        fail(&p->run, p->subscriber.who, "message %d has %zu bytes, expected %zu", index, size, p->size);
        return -1;
    }
    if (stamp > 0 && p->sampled < p->samples) p->latencies[p->sampled++] = (now() - stamp) * 1e6;
    return 0;
}

static int pubsub_finish(struct pubsub *p, int status, double *seconds) {
    if (status == 0 && p->sampled != p->samples) {
        fail(&p->run, NULL, "got %d latency samples of %d", p->sampled, p->samples);
        status = -1;
    }
    if (status == 0) *seconds = p->finished - p->started;
    close_sockets(&p->run);
    conn_free(&p->publisher);
    conn_free(&p->subscriber);
    return status;
}

// What a publisher does between writes (`final` 0: about once per write buffer, never waiting)
// and after the last (`final` 1): answer the server, read its replies, notice its errors. `written`
// counts the messages written so far; `state` is the function's own. -1 on failure.
typedef int (*publish_poll)(struct conn *c, uint64_t written, uint64_t *state, int final);

// Publishes p->count messages of p->size bytes, each `header` + body + CRLF, through the
// publisher's write buffer; every (count/samples)-th body starts with its send time.
static void publish_messages(struct pubsub *p, const char *header, publish_poll poll) {
    struct conn *c = &p->publisher;
    char *body = calloc(1, p->size ? p->size : 1);
    if (!body) {
        fail(&p->run, c->who, "out of memory");
        return;
    }
    size_t header_length = strlen(header), unpolled = 0;
    uint64_t state = 0;
    p->started = now();
    for (int i = 0; i < p->count; i++) {
        double stamp = pubsub_stamp(p, i);
        if (p->size >= sizeof stamp) memcpy(body, &stamp, sizeof stamp);
        if (conn_put(c, header, header_length) || conn_put(c, body, p->size) || conn_put(c, "\r\n", 2)) goto done;
        unpolled += header_length + p->size + 2;
        if (unpolled >= WRITE_BUFFER) {
            unpolled = 0;
            if (poll(c, (uint64_t)i + 1, &state, 0)) goto done;
        }
    }
    poll(c, (uint64_t)p->count, &state, 1);
done:
    free(body);
}

// NATS: answer PINGs and notice -ERR while writing; at the end flush, and PING/PONG to be sure the
// server processed every PUB.
static int nats_publish_poll(struct conn *c, uint64_t written, uint64_t *state, int final) {
    (void)written;
    (void)state;
    return final ? nats_sync(c) : nats_poll(c, NULL);
}

static void *nats_publish(void *raw) {
    struct pubsub *p = raw;
    char header[128];
    snprintf(header, sizeof header, "PUB %s %zu\r\n", ADVERTS, p->size);
    publish_messages(p, header, nats_publish_poll);
    return NULL;
}

static void *nats_subscribe(void *raw) {
    struct pubsub *p = raw;
    struct conn *c = &p->subscriber;
    for (int i = 0; i < p->count;) {
        double stamp = 0;
        size_t size;
        int result = nats_step(c, &stamp, p->size < sizeof stamp ? p->size : sizeof stamp, &size, NULL);
        if (result < 0) return NULL;
        if (result == 0) continue;
        if (pubsub_received(p, i, size, stamp)) return NULL;
        i++;
    }
    p->finished = now();
    return NULL;
}

int nats_pubsub(int port, int count, size_t size, double *seconds, double *latencies, int samples) {
    struct pubsub p;
    if (pubsub_init(&p, "nats_pubsub", port, count, size, seconds, latencies, samples)) return -1;
    int64_t max_payload = 1 << 20;
    int status = -1;
    if (nats_open(&p.subscriber, &p.run, "subscriber", port, ADVERTS, &max_payload) == 0 &&
        nats_open(&p.publisher, &p.run, "publisher", port, NULL, &max_payload) == 0) {
        if (max_payload >= 0 && size > (uint64_t)max_payload) {
            fail(&p.run, NULL, "size %zu exceeds the server's max_payload %lld", size, (long long)max_payload);
        } else {
            status = run_threads(&p.run, nats_publish, nats_subscribe, &p);
        }
    }
    return pubsub_finish(&p, status, seconds);
}

// MARK: Redis (RESP2)

// Reads one RESP header line: its type ('+', ':', '$', '*') and its number (0 for '+').
static int resp_header(struct conn *c, char *type, long long *value) {
    size_t length;
    char *line = conn_line(c, &length);
    if (!line) return -1;
    if (length == 0) {
        fail(c->run, c->who, "protocol error: empty line from redis-server");
        return -1;
    }
    *type = line[0];
    *value = 0;
    if (line[0] == '-') {
        fail(c->run, c->who, "redis-server: %.200s", line + 1);
        return -1;
    }
    if (line[0] == '+') return 0;
    if (line[0] == ':' || line[0] == '$' || line[0] == '*') {
        char *end;
        errno = 0;
        *value = strtoll(line + 1, &end, 10);
        if (!errno && end != line + 1 && *end == '\0') return 0;
    }
    fail(c->run, c->who, "unexpected from redis-server: %.80s", line);
    return -1;
}

// Reads a bulk string: its first `capacity` bytes to `destination`, its length to `size`.
static int resp_bulk(struct conn *c, void *destination, size_t capacity, size_t *size) {
    char type;
    long long value;
    if (resp_header(c, &type, &value)) return -1;
    if (type != '$' || value < 0) {
        fail(c->run, c->who, "protocol error: expected a bulk string");
        return -1;
    }
    *size = (size_t)value;
    return conn_take(c, destination, capacity, (size_t)value) || conn_crlf(c) ? -1 : 0;
}

// Reads one reply that must be an integer; a PUBLISH's says how many subscribers got the message.
static int resp_publish_reply(struct conn *c) {
    char type;
    long long value;
    if (resp_header(c, &type, &value)) return -1;
    if (type != ':') {
        fail(c->run, c->who, "protocol error: expected an integer reply");
        return -1;
    }
    if (value < 1) {
        fail(c->run, c->who, "PUBLISH reached no subscriber%s", REDIS_DROPPED);
        return -1;
    }
    return 0;
}

// Reads PUBLISH replies until `*replies` reaches `target`; with `only_ready`, only those that have
// already arrived (it never waits then). -1 on a failed or refused reply.
static int resp_read_replies(struct conn *c, uint64_t *replies, uint64_t target, int only_ready) {
    while (*replies < target && (!only_ready || conn_readable(c))) {
        if (resp_publish_reply(c)) return -1;
        (*replies)++;
    }
    return 0;
}

// The RESP array header of PUBLISH `channel` with a `size`-byte payload, up to the payload.
static void resp_publish_prefix(char *buffer, size_t capacity, const char *channel, size_t size) {
    snprintf(buffer, capacity, "*3\r\n$7\r\nPUBLISH\r\n$%zu\r\n%s\r\n$%zu\r\n", strlen(channel), channel, size);
}

// Reads one pub/sub push that must be a `message`: its payload like resp_bulk.
static int resp_message(struct conn *c, void *destination, size_t capacity, size_t *size) {
    char type;
    long long value;
    if (resp_header(c, &type, &value)) return -1;
    if (type != '*' || value != 3) {
        fail(c->run, c->who, "protocol error: expected a 3-element push");
        return -1;
    }
    char kind[16] = {0};
    size_t length, channel;
    if (resp_bulk(c, kind, sizeof kind - 1, &length)) return -1;
    if (length != 7 || memcmp(kind, "message", 7) != 0) {
        fail(c->run, c->who, "unexpected push: %s", kind);
        return -1;
    }
    return resp_bulk(c, NULL, 0, &channel) || resp_bulk(c, destination, capacity, size) ? -1 : 0;
}

// Connects; with a channel, subscribes and waits for the confirmation, otherwise PINGs.
static int redis_open(struct conn *c, struct run *run, const char *who, int port, const char *channel) {
    if (conn_open(c, run, who, port)) return -1;
    if (channel) c->closed_hint = REDIS_DROPPED;
    char type;
    long long value;
    if (!channel) {
        if (conn_put_string(c, "*1\r\n$4\r\nPING\r\n") || conn_flush(c) || resp_header(c, &type, &value)) return -1;
        if (type != '+') {
            fail(run, who, "unexpected reply to PING");
            return -1;
        }
        return 0;
    }
    char command[128];
    snprintf(command, sizeof command, "*2\r\n$9\r\nSUBSCRIBE\r\n$%zu\r\n%s\r\n", strlen(channel), channel);
    if (conn_put_string(c, command) || conn_flush(c) || resp_header(c, &type, &value)) return -1;
    char kind[16] = {0};
    size_t length, name;
    if (type != '*' || value != 3 || resp_bulk(c, kind, sizeof kind - 1, &length) || resp_bulk(c, NULL, 0, &name) ||
        resp_header(c, &type, &value)) {
        if (!failed(run)) fail(run, who, "unexpected reply to SUBSCRIBE");
        return -1;
    }
    if (strcmp(kind, "subscribe") != 0 || type != ':') {
        fail(run, who, "unexpected reply to SUBSCRIBE");
        return -1;
    }
    return 0;
}

// Redis, pipelined: read the PUBLISH replies that have arrived while writing; at the end flush and
// read the rest (each must say a subscriber got the message).
static int redis_publish_poll(struct conn *c, uint64_t written, uint64_t *replies, int final) {
    if (final && conn_flush(c)) return -1;
    return resp_read_replies(c, replies, written, !final);
}

static void *redis_publish(void *raw) {
    struct pubsub *p = raw;
    char header[128];
    resp_publish_prefix(header, sizeof header, ADVERTS, p->size);
    publish_messages(p, header, redis_publish_poll);
    return NULL;
}

static void *redis_subscribe(void *raw) {
    struct pubsub *p = raw;
    struct conn *c = &p->subscriber;
    for (int i = 0; i < p->count; i++) {
        double stamp = 0;
        size_t size;
        if (resp_message(c, &stamp, p->size < sizeof stamp ? p->size : sizeof stamp, &size)) return NULL;
        if (pubsub_received(p, i, size, stamp)) return NULL;
    }
    p->finished = now();
    return NULL;
}

int redis_pubsub(int port, int count, size_t size, double *seconds, double *latencies, int samples) {
    struct pubsub p;
    if (pubsub_init(&p, "redis_pubsub", port, count, size, seconds, latencies, samples)) return -1;
    int status = -1;
    if (redis_open(&p.subscriber, &p.run, "subscriber", port, ADVERTS) == 0 &&
        redis_open(&p.publisher, &p.run, "publisher", port, NULL) == 0) {
        status = run_threads(&p.run, redis_publish, redis_subscribe, &p);
    }
    return pubsub_finish(&p, status, seconds);
}

// MARK: Credit-based transfers (NATS and Redis)

struct transfer {
    struct run run;
    // NATS: one connection a side (sender: PUB data, SUB credit; receiver: SUB data, PUB credit).
    // Redis: the sender publishes on send_data and subscribes on send_credit; the receiver
    // subscribes on receive_data and publishes on receive_credit.
    struct conn send_data, send_credit, receive_data, receive_credit;
    uint64_t total, chunks;
    size_t chunk;
    int window;
    double started, finished;
};

static int transfer_check(struct transfer *t, int port, uint64_t total, size_t chunk, int window) {
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

// Counts a received chunk of `size` bytes; -1 (said) for an empty chunk or more bytes than were sent.
static int transfer_received(struct transfer *t, const char *who, uint64_t *received, size_t size) {
    *received += size;
    if (size == 0 || *received > t->total) {
        fail(&t->run, who, "received %llu bytes, more than the %llu sent", (unsigned long long)*received,
             (unsigned long long)t->total);
        return -1;
    }
    return 0;
}

static double transfer_finish(struct transfer *t, int status) {
    close_sockets(&t->run);
    conn_free(&t->send_data);
    conn_free(&t->send_credit);
    conn_free(&t->receive_data);
    conn_free(&t->receive_credit);
    return status == 0 ? t->finished - t->started : -1;
}

static void *nats_send(void *raw) {
    struct transfer *t = raw;
    struct conn *c = &t->send_data;
    char *data = malloc(t->chunk);
    if (!data) {
        fail(&t->run, c->who, "out of memory");
        return NULL;
    }
    memset(data, 0x5A, t->chunk);
    uint64_t credit = 0, offset = 0;
    for (uint64_t sent = 0; sent < t->chunks; sent++) {
        // Take the credit that has arrived; with none, block for the next grant.
        if (nats_poll(c, &credit)) goto done;
        while (credit == 0) {
            char text[24] = {0};
            size_t size;
            int result = nats_step(c, text, sizeof text - 1, &size, NULL);
            if (result < 0) goto done;
            uint64_t granted;
            if (result == 1 && (size >= sizeof text || parse_size(text, &granted))) {
                fail(&t->run, c->who, "malformed credit message");
                goto done;
            }
            if (result == 1) credit += granted;
        }
        size_t n = t->total - offset < t->chunk ? (size_t)(t->total - offset) : t->chunk;
        char header[128];
        snprintf(header, sizeof header, "PUB %s %zu\r\n", DATA, n);
        struct iovec iov[3] = {{.iov_base = header, .iov_len = strlen(header)},
                                {.iov_base = data, .iov_len = n},
                                {.iov_base = (void *)"\r\n", .iov_len = 2}};
        if (send_iov(&t->run, c->who, c->fd, iov, 3)) goto done;
        offset += n;
        credit--;
    }
    nats_sync(c);  // the server has taken every chunk without complaint
done:
    free(data);
    return NULL;
}

static void *nats_receive(void *raw) {
    struct transfer *t = raw;
    struct conn *c = &t->receive_data;
    char grant[128];
    uint64_t granted = (uint64_t)t->window < t->chunks ? (uint64_t)t->window : t->chunks;
    t->started = now();
    char digits[24];
    snprintf(digits, sizeof digits, "%llu", (unsigned long long)granted);
    snprintf(grant, sizeof grant, "PUB %s %zu\r\n%s\r\n", CREDIT, strlen(digits), digits);
    if (conn_put_string(c, grant) || conn_flush(c)) return NULL;
    snprintf(grant, sizeof grant, "PUB %s 1\r\n1\r\n", CREDIT);
    uint64_t received = 0;
    while (received < t->total) {
        size_t size;
        int result = nats_step(c, NULL, 0, &size, NULL);
        if (result < 0) return NULL;
        if (result == 0) continue;
        if (transfer_received(t, c->who, &received, size)) return NULL;
        if (granted < t->chunks) {
            if (conn_put_string(c, grant) || conn_flush(c)) return NULL;
            granted++;
        }
    }
    t->finished = now();
    return NULL;
}

double nats_transfer(int port, uint64_t total, size_t chunk, int window) {
    struct transfer t;
    memset(&t, 0, sizeof t);
    run_init(&t.run, "nats_transfer");
    if (transfer_check(&t, port, total, chunk, window)) return -1;
    int64_t max_payload = 1 << 20;
    int status = -1;
    if (nats_open(&t.receive_data, &t.run, "receiver", port, DATA, &max_payload) == 0 &&
        nats_open(&t.send_data, &t.run, "sender", port, CREDIT, &max_payload) == 0) {
        if (max_payload >= 0 && chunk > (uint64_t)max_payload) {
            fail(&t.run, NULL, "chunk %zu exceeds the server's max_payload %lld", chunk, (long long)max_payload);
        } else {
            status = run_threads(&t.run, nats_send, nats_receive, &t);
        }
    }
    return transfer_finish(&t, status);
}

static void *redis_send(void *raw) {
    struct transfer *t = raw;
    struct conn *out = &t->send_data, *credits = &t->send_credit;
    char *data = malloc(t->chunk);
    if (!data) {
        fail(&t->run, out->who, "out of memory");
        return NULL;
    }
    memset(data, 0x5A, t->chunk);
    uint64_t credit = 0, offset = 0, replies = 0;
    for (uint64_t sent = 0; sent < t->chunks; sent++) {
        while (credit == 0 || conn_readable(credits)) {
            char text[24] = {0};
            size_t size;
            uint64_t granted;
            if (resp_message(credits, text, sizeof text - 1, &size)) goto done;
            if (size >= sizeof text || parse_size(text, &granted)) {
                fail(&t->run, credits->who, "malformed credit message");
                goto done;
            }
            credit += granted;
        }
        if (resp_read_replies(out, &replies, sent, 1)) goto done;
        size_t n = t->total - offset < t->chunk ? (size_t)(t->total - offset) : t->chunk;
        char header[128];
        resp_publish_prefix(header, sizeof header, DATA, n);
        struct iovec iov[3] = {{.iov_base = header, .iov_len = strlen(header)},
                                {.iov_base = data, .iov_len = n},
                                {.iov_base = (void *)"\r\n", .iov_len = 2}};
        if (send_iov(&t->run, out->who, out->fd, iov, 3)) goto done;
        offset += n;
        credit--;
    }
    if (resp_read_replies(out, &replies, t->chunks, 0)) goto done;
done:
    free(data);
    return NULL;
}

static void *redis_receive(void *raw) {
    struct transfer *t = raw;
    struct conn *in = &t->receive_data, *credits = &t->receive_credit;
    char grant[256], prefix[128];
    uint64_t granted = (uint64_t)t->window < t->chunks ? (uint64_t)t->window : t->chunks, replies = 0, grants = 1;
    t->started = now();
    char digits[24];
    snprintf(digits, sizeof digits, "%llu", (unsigned long long)granted);
    resp_publish_prefix(prefix, sizeof prefix, CREDIT, strlen(digits));
    snprintf(grant, sizeof grant, "%s%s\r\n", prefix, digits);
    if (conn_put_string(credits, grant) || conn_flush(credits)) return NULL;
    resp_publish_prefix(prefix, sizeof prefix, CREDIT, 1);
    snprintf(grant, sizeof grant, "%s1\r\n", prefix);
    uint64_t received = 0;
    while (received < t->total) {
        size_t size;
        if (resp_message(in, NULL, 0, &size)) return NULL;
        if (transfer_received(t, in->who, &received, size)) return NULL;
        if (granted < t->chunks) {
            if (conn_put_string(credits, grant) || conn_flush(credits)) return NULL;
            granted++;
            grants++;
        }
        if (resp_read_replies(credits, &replies, grants, 1)) return NULL;
    }
    t->finished = now();
    resp_read_replies(credits, &replies, grants, 0);
    return NULL;
}

double redis_transfer(int port, uint64_t total, size_t chunk, int window) {
    struct transfer t;
    memset(&t, 0, sizeof t);
    run_init(&t.run, "redis_transfer");
    if (transfer_check(&t, port, total, chunk, window)) return -1;
    int status = -1;
    if (redis_open(&t.receive_data, &t.run, "receiver", port, DATA) == 0 &&
        redis_open(&t.send_credit, &t.run, "sender (credit)", port, CREDIT) == 0 &&
        redis_open(&t.receive_credit, &t.run, "receiver (credit)", port, NULL) == 0 &&
        redis_open(&t.send_data, &t.run, "sender", port, NULL) == 0) {
        status = run_threads(&t.run, redis_send, redis_receive, &t);
    }
    return transfer_finish(&t, status);
}

// MARK: Plain TCP

struct tcp {
    struct run run;
    int sender, receiver;
    uint64_t total;
    size_t chunk;
    double started, finished;
};

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
        struct iovec iov = {.iov_base = data, .iov_len = n};
        if (send_iov(&t->run, "sender", t->sender, &iov, 1)) break;
        sent += n;
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
        ssize_t n = recv(t->receiver, data, t->chunk, 0);
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
    int listener = open_socket(&t.run, "listener");
    if (listener < 0) goto done;
    if (bind(listener, (struct sockaddr *)&address, sizeof address) != 0 || listen(listener, 1) != 0 ||
        getsockname(listener, (struct sockaddr *)&address, &length) != 0) {
        fail(&t.run, "listener", "bind/listen on 127.0.0.1: %s", describe(errno, text, sizeof text));
        goto done;
    }
    t.sender = open_socket(&t.run, "sender");
    if (t.sender < 0) goto done;
    if (connect(t.sender, (struct sockaddr *)&address, sizeof address) != 0) {
        fail(&t.run, "sender", "connect to 127.0.0.1:%d: %s", ntohs(address.sin_port), describe(errno, text, sizeof text));
        goto done;
    }
    t.receiver = accept(listener, NULL, NULL);  // bounded by the listener's receive timeout
    if (t.receiver < 0) {
        fail(&t.run, "listener", "accept: %s", describe(errno, text, sizeof text));
        goto done;
    }
    if (t.run.socket_count < MAX_SOCKETS) t.run.sockets[t.run.socket_count++] = t.receiver;
    int one = 1;
    struct timeval timeout = {.tv_sec = IO_TIMEOUT_SECONDS, .tv_usec = 0};
    setsockopt(t.receiver, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(t.receiver, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    setsockopt(t.receiver, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    status = run_threads(&t.run, tcp_send, tcp_receive, &t);
done:
    close_sockets(&t.run);
    return status == 0 ? t.finished - t.started : -1;
}
