#ifndef HANDOFF_PEER_BASELINES_H
#define HANDOFF_PEER_BASELINES_H

#include <stddef.h>
#include <stdint.h>

// Peer baselines for the benchmarks: the same work as the raw libzmq baselines, done through a
// NATS server, a Redis server, or a plain TCP socket. Plain C and pthreads, with the peers' own C
// client libraries, as their users run them: nats.c (libnats, <nats/nats.h>, -lnats) and hiredis
// (<hiredis/hiredis.h>, -lhiredis). The plain TCP socket needs no library.
//
// Common rules:
// - The servers are not started here: the caller starts nats-server / redis-server on 127.0.0.1
//   and passes the port. All traffic goes to 127.0.0.1.
// - Each side (publisher and subscriber, sender and receiver) runs on its own thread, with its own
//   connection(s); every thread is joined and every connection, subscription and message freed
//   before returning. nats_Close() is never called: it is process-wide, the caller's to call.
// - Times come from CLOCK_MONOTONIC. Every connection has TCP_NODELAY, and every wait (connect,
//   send, receive, flush) is bounded by 10 s, so a dead or stalled server makes a function fail
//   instead of hanging. NATS connections do not reconnect.
// - On failure a function prints one line ("peer_baselines: <function>: <reason>") to stderr and
//   returns -1. SIGPIPE does not end the process: nats.c sets it to SIG_IGN for the whole process
//   (when the library opens); the Redis functions block it in their threads; TCP uses MSG_NOSIGNAL.

/// NATS core pub/sub through nats-server on 127.0.0.1:`port`. A subscriber connection makes a
/// synchronous subscription to `handoff.bench.adverts` (registered, natsConnection_FlushTimeout,
/// before anything is published; no pending limits, so the library drops nothing), then a publisher
/// connection sends `count` messages of `size` bytes with natsConnection_Publish, through the
/// library's write buffer, and flushes (a PING/PONG round trip) at the end; the subscriber takes
/// them with natsSubscription_NextMsg. Writes to `seconds` the time from the publisher's first send
/// to the subscriber's receipt of the last message. Every (count/samples)-th message carries its
/// send time in its first 8 bytes; `samples` one-way latencies (handed to natsConnection_Publish ->
/// returned by NextMsg), in microseconds, go to `latencies` (capacity `samples`; `samples` may be 0,
/// otherwise it must be <= count and `size` >= 8). `size` must not exceed the server's max_payload
/// (1 MiB by default). The subscriber checks every message's size and that exactly `count` arrive.
/// Returns 0 or -1 (-1 also if nats-server drops the subscriber as a slow consumer: see max_pending).
int nats_pubsub(int port, int count, size_t size, double *seconds, double *latencies, int samples);

/// Redis pub/sub through redis-server on 127.0.0.1:`port`, the same work and measurements as
/// nats_pubsub, with hiredis: the subscriber connection sends SUBSCRIBE `handoff.bench.adverts` and
/// waits for the confirmation, then takes the `message` pushes with redisGetReply; the publisher
/// connection pipelines `count` PUBLISH commands (redisAppendCommand, written every 64 KiB) and
/// reads their replies with redisGetReply up to 1024 behind, the rest at the end (each must say
/// >= 1 subscriber got the message). `seconds` = publisher's first send to subscriber's last
/// receipt; `samples` one-way latencies in microseconds (appended -> returned by redisGetReply).
/// Returns 0 or -1 (-1 also if redis-server drops the subscriber: see client-output-buffer-limit
/// pubsub).
int redis_pubsub(int port, int count, size_t size, double *seconds, double *latencies, int samples);

/// Bulk transfer of `total` bytes in `chunk`-byte messages (the last may be shorter) through
/// nats-server on 127.0.0.1:`port`, with credit-based flow control: the receiver (subscribed to
/// `handoff.bench.data`) grants `window` chunks of credit up front, then one more per chunk
/// received (a publish to `handoff.bench.credit`, never more credit than there are chunks); the
/// sender (subscribed to `handoff.bench.credit`) publishes a chunk only when it has credit. Both
/// connections send each publish at once (natsOptions_SetSendAsap), not through the library's
/// buffer. Returns the seconds from the receiver's first grant to the last byte received, or -1.
/// The receiver checks it got exactly `total` bytes. `chunk` must be <= the server's max_payload.
double nats_transfer(int port, uint64_t total, size_t chunk, int window);

/// The same credit-based bulk transfer as nats_transfer through redis-server on 127.0.0.1:`port`:
/// chunks are PUBLISHed on channel `handoff.bench.data`, credit goes back on `handoff.bench.credit`.
/// RESP2 pub/sub needs a subscribing connection and a publishing connection on each side, so four
/// connections; each PUBLISH is written at once (redisBufferWrite) and its reply read up to
/// `window` publishes later, so the flow never waits for one. Returns the seconds from the
/// receiver's first grant to the last byte received, or -1.
double redis_transfer(int port, uint64_t total, size_t chunk, int window);

/// A plain TCP socket over loopback, no broker: a listener on 127.0.0.1 port 0 (the kernel picks
/// the port), a sender thread send()s `total` bytes in `chunk`-byte calls, a receiver thread
/// recv()s until it has all of them (checking it got exactly `total`). Kernel-default (auto-tuned)
/// socket buffers, TCP_NODELAY. Returns the seconds from the first send to the last byte received,
/// or -1.
double tcp_transfer(uint64_t total, size_t chunk);

#endif
