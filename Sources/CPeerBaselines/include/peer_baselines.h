#ifndef HANDOFF_PEER_BASELINES_H
#define HANDOFF_PEER_BASELINES_H

#include <stddef.h>
#include <stdint.h>

// Peer baselines for the benchmarks: the same work as the raw libzmq baselines, done through a
// NATS server, a Redis server, or a plain TCP socket. Plain C, POSIX sockets and pthreads, no
// client libraries: the NATS text protocol and RESP are spoken directly.
//
// Common rules:
// - The servers are not started here: the caller starts nats-server / redis-server on 127.0.0.1
//   and passes the port. All traffic goes to 127.0.0.1.
// - Each side (publisher and subscriber, sender and receiver) runs on its own thread, with its own
//   connection(s); every thread is joined and every socket closed before returning.
// - Times come from CLOCK_MONOTONIC. Every connection has TCP_NODELAY and 10 s send and receive
//   timeouts, so a dead or stalled server makes a function fail instead of hanging.
// - On failure a function prints one line ("peer_baselines: <function>: <reason>") to stderr and
//   returns -1. SIGPIPE is never raised (sends use MSG_NOSIGNAL / SO_NOSIGPIPE).

/// NATS core pub/sub through nats-server on 127.0.0.1:`port`. A subscriber connection subscribes
/// to `handoff.bench.adverts` (confirmed by PING/PONG before anything is published), then a
/// publisher connection sends `count` messages of `size` bytes with PUB, through a 64 KiB
/// user-space write buffer (flushed when full and at the end), as the NATS client libraries do.
/// Writes to `seconds` the time from the publisher's first send to the subscriber's receipt of the
/// last message. Every (count/samples)-th message carries its send time in its first 8 bytes;
/// `samples` one-way latencies (send into the publisher's buffer -> parsed by the subscriber), in
/// microseconds, go to `latencies` (capacity `samples`; `samples` may be 0, otherwise it must be
/// <= count and `size` >= 8). `size` must not exceed the server's max_payload (1 MiB by default).
/// The subscriber checks every message's size and that exactly `count` arrive. Returns 0 or -1
/// (-1 also if nats-server drops the subscriber as a slow consumer: see max_pending).
int nats_pubsub(int port, int count, size_t size, double *seconds, double *latencies, int samples);

/// Redis pub/sub through redis-server on 127.0.0.1:`port`, the same work and measurements as
/// nats_pubsub: the subscriber connection sends SUBSCRIBE `handoff.bench.adverts` and waits for the
/// confirmation; the publisher connection pipelines `count` PUBLISH commands (RESP arrays) through
/// a 64 KiB write buffer without waiting for replies, reading the replies that have arrived between
/// buffer flushes and the rest at the end (each must say >= 1 subscriber got the message); the
/// subscriber parses the `message` pushes. `seconds` = publisher's first send to subscriber's last
/// receipt; `samples` one-way latencies in microseconds as in nats_pubsub. Returns 0 or -1
/// (-1 also if redis-server drops the subscriber: see client-output-buffer-limit pubsub).
int redis_pubsub(int port, int count, size_t size, double *seconds, double *latencies, int samples);

/// Bulk transfer of `total` bytes in `chunk`-byte messages (the last may be shorter) through
/// nats-server on 127.0.0.1:`port`, with credit-based flow control: the receiver (subscribed to
/// `handoff.bench.data`) grants `window` chunks of credit up front, then one more per chunk
/// received (a PUB to `handoff.bench.credit`, never more credit than there are chunks); the sender
/// (subscribed to `handoff.bench.credit`) publishes a chunk only when it has credit, one send call
/// per chunk. Returns the seconds from the receiver's first grant to the last byte received, or -1.
/// The receiver checks it got exactly `total` bytes. `chunk` must be <= the server's max_payload.
double nats_transfer(int port, uint64_t total, size_t chunk, int window);

/// The same credit-based bulk transfer as nats_transfer through redis-server on 127.0.0.1:`port`:
/// chunks are PUBLISHed on channel `handoff.bench.data`, credit goes back on `handoff.bench.credit`.
/// RESP2 pub/sub needs a subscribing connection and a publishing connection on each side, so four
/// connections; PUBLISH replies are read without blocking the flow. Returns the seconds from the
/// receiver's first grant to the last byte received, or -1.
double redis_transfer(int port, uint64_t total, size_t chunk, int window);

/// A plain TCP socket over loopback, no broker: a listener on 127.0.0.1 port 0 (the kernel picks
/// the port), a sender thread send()s `total` bytes in `chunk`-byte calls, a receiver thread
/// recv()s until it has all of them (checking it got exactly `total`). Kernel-default (auto-tuned)
/// socket buffers, TCP_NODELAY. Returns the seconds from the first send to the last byte received,
/// or -1.
double tcp_transfer(uint64_t total, size_t chunk);

#endif
