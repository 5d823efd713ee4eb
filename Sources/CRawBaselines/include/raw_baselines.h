#ifndef HANDOFF_RAW_BASELINES_H
#define HANDOFF_RAW_BASELINES_H

#include <stddef.h>
#include <stdint.h>

/// Raw libzmq, no Handoff: moves `total` bytes from a ROUTER thread to a DEALER thread over
/// tcp://127.0.0.1 with credit-based flow control (the DEALER keeps `window` chunk requests
/// outstanding; the ROUTER answers each with one `chunk`-byte frame), as in the ZeroMQ guide's
/// file-transfer pattern. Returns the seconds from the first request to the last byte, or -1.
/// With `checksum` nonzero both ends do what a Handoff stream's ends do to its bytes: the ROUTER
/// copies each chunk into libzmq's buffer and checksums it (CRC-32C) in one pass, and the DEALER
/// checksums every byte it receives; without, the DEALER never reads a byte.
double raw_dealer_router_transfer(uint64_t total, size_t chunk, int window, int checksum);

/// The serving end of a raw baseline run between two processes (opaque).
struct raw_server;

/// The same transfer with each end in a process of its own. The serving end: a ROUTER (in a
/// context of its own) bound at `bind` (e.g. `tcp://127.0.0.1:*`), its endpoint written to
/// `endpoint`; NULL when the bind fails.
struct raw_server *raw_stream_bind(const char *bind, char *endpoint, size_t capacity);

/// Answers requests with `chunk`-byte frames until `total` bytes are sent, then closes and frees
/// `server` (waiting up to 5 s for the tail to leave).
/// `checksum` as in raw_dealer_router_transfer.
void raw_stream_serve(struct raw_server *server, uint64_t total, size_t chunk, int checksum);

/// The fetching end: a DEALER connects to `endpoint` and keeps `window` requests (of one `chunk`
/// each, never past `total`) outstanding until `total` bytes arrived. Returns the seconds from the first request to the last byte, or -1.
/// `checksum` as in raw_dealer_router_transfer.
double raw_stream_fetch(const char *endpoint, uint64_t total, size_t chunk, int window, int checksum);

/// Raw libzmq REQ/REP: `rounds` round trips of `size`-byte messages between two threads over
/// tcp://127.0.0.1; each round trip's time in microseconds goes to `latencies` (capacity `rounds`).
/// Returns 0, or -1 on failure.
int raw_req_rep(int rounds, size_t size, double *latencies);

/// The same round trips with each end in a process of its own. The answering end: a REP (in a
/// context of its own) bound at `bind`, its endpoint written to `endpoint`; NULL when the bind fails.
struct raw_server *raw_rep_bind(const char *bind, char *endpoint, size_t capacity);

/// Answers `rounds` requests with the request itself, then closes and frees `server`.
void raw_rep_serve(struct raw_server *server, int rounds);

/// The asking end: a REQ connects to `endpoint` and makes `rounds` round trips of `size` bytes,
/// each one's time in microseconds in `latencies` (capacity `rounds`). Returns 0, or -1 on failure
/// (a reply that does not come within 10 s).
int raw_req_fetch(const char *endpoint, int rounds, size_t size, double *latencies);

/// Raw libzmq pub/sub through a proxy: a PUB thread sends `count` messages of `size` bytes (a topic
/// frame and a body) to an XSUB/XPUB proxy thread (zmq_proxy), a SUB receives them, all over
/// tcp://127.0.0.1. Writes the seconds from first send to last receipt, the process's CPU seconds
/// (every thread) over the same span, and `samples` one-way latencies in microseconds (every
/// count/samples-th message carries its send time). Returns 0 or -1.
int raw_pub_proxy_sub(int count, size_t size, double *seconds, double *cpu_seconds, double *latencies, int samples);

/// The same flood with the proxy in a process of its own: the PUB and the SUB (interleaved on the
/// calling thread) connect to the proxy's `frontend` and `backend`. The CPU seconds are this
/// process's only.
int raw_pub_proxy_sub_at(const char *frontend, const char *backend, int count, size_t size,
                         double *seconds, double *cpu_seconds, double *latencies, int samples);
/// The same through a proxy at (frontend, backend), the PUB paced at `rate` messages a second
/// (each sent at its time, spinning on the SUB between), for the proxy's CPU at a given rate: a
/// flood lets it take messages in batches, which a steady sender does not. Returns 0 or -1.
int raw_pub_proxy_sub_paced_at(const char *frontend, const char *backend, int count, size_t size, double rate,
                               double *seconds);
/// A proxy for a process of its own (opaque).
struct raw_proxy;
/// Starts an XSUB/XPUB zmq_proxy thread (in a context of its own) bound on loopback; writes its
/// endpoints to `frontend` and `backend` (each of `capacity` bytes).
struct raw_proxy *raw_proxy_start(char *frontend, char *backend, size_t capacity);
/// The same with both sockets CURVE servers of secret key `curve_secret` (Z85), every client key
/// accepted (no ZAP handler: a raw proxy checks nobody); NULL is raw_proxy_start.
struct raw_proxy *raw_proxy_start_curve(char *frontend, char *backend, size_t capacity, const char *curve_secret);
/// Stops the proxy thread and frees `proxy`.
void raw_proxy_stop(struct raw_proxy *proxy);
/// Raw libzmq pub/sub through the same proxy, one message at a time: sends a `size`-byte message
/// (with its topic frame) and waits until the SUB has it, `count` times; each one-way time in
/// microseconds goes to `latencies` (capacity `count`). Returns 0 or -1.
int raw_pub_proxy_sub_latency(int count, size_t size, double *latencies);
/// The same through a proxy at (frontend, backend), e.g. raw_proxy_start's in another process.
int raw_pub_proxy_sub_latency_at(const char *frontend, const char *backend, int count, size_t size, double *latencies);

#endif
