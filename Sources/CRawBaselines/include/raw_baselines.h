#ifndef HANDOFF_RAW_BASELINES_H
#define HANDOFF_RAW_BASELINES_H

#include <stddef.h>
#include <stdint.h>

/// Raw libzmq, no Handoff: moves `total` bytes from a ROUTER thread to a DEALER thread over
/// tcp://127.0.0.1 with credit-based flow control (the DEALER keeps `window` chunk requests
/// outstanding; the ROUTER answers each with one `chunk`-byte frame), as in the ZeroMQ guide's
/// file-transfer pattern. Returns the seconds from the first request to the last byte, or -1.
double raw_dealer_router_transfer(uint64_t total, size_t chunk, int window);

#endif
