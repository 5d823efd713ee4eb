// XXH64 (seed 0), the stream checksum the contract lists beside CRC-32C and SHA-256
// (stream.proto, ChecksumAlgorithm), written from its specification (xxhash.com, doc/xxhash_spec.md):
// four 64-bit lanes over 32-byte stripes, then the tail and the avalanche. Plain C, no library.
#include <string.h>
#include "handoff_checksum.h"

static const uint64_t prime1 = 0x9E3779B185EBCA87ULL;
static const uint64_t prime2 = 0xC2B2AE3D27D4EB4FULL;
static const uint64_t prime3 = 0x165667B19E3779F9ULL;
static const uint64_t prime4 = 0x85EBCA77C2B2AE63ULL;
static const uint64_t prime5 = 0x27D4EB2F165667C5ULL;

static inline uint64_t rotl(uint64_t x, int n) { return (x << n) | (x >> (64 - n)); }

// Little-endian loads whatever the CPU's order (the specification reads lanes little-endian).
static inline uint64_t load64(const uint8_t *p) {
    uint64_t value = 0;
    for (int i = 7; i >= 0; i--) value = value << 8 | p[i];
    return value;
}

static inline uint32_t load32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t round64(uint64_t accumulator, uint64_t lane) {
    accumulator += lane * prime2;
    return rotl(accumulator, 31) * prime1;
}

static inline uint64_t merge(uint64_t accumulator, uint64_t lane) {
    accumulator ^= round64(0, lane);
    return accumulator * prime1 + prime4;
}

void handoff_xxh64_init(handoff_xxh64 *context) {
    memset(context, 0, sizeof *context);
    context->lanes[0] = prime1 + prime2;
    context->lanes[1] = prime2;
    context->lanes[2] = 0;
    context->lanes[3] = 0 - prime1;
}

static void stripe(uint64_t lanes[4], const uint8_t *p) {
    lanes[0] = round64(lanes[0], load64(p));
    lanes[1] = round64(lanes[1], load64(p + 8));
    lanes[2] = round64(lanes[2], load64(p + 16));
    lanes[3] = round64(lanes[3], load64(p + 24));
}

void handoff_xxh64_update(handoff_xxh64 *context, const void *data, size_t length) {
    const uint8_t *p = data;
    context->length += length;
    if (context->buffered + length < 32) {
        if (length > 0) memcpy(context->buffer + context->buffered, p, length);
        context->buffered += length;
        return;
    }
    if (context->buffered > 0) {
        size_t fill = 32 - context->buffered;
        memcpy(context->buffer + context->buffered, p, fill);
        stripe(context->lanes, context->buffer);
        p += fill;
        length -= fill;
        context->buffered = 0;
    }
    while (length >= 32) {
        stripe(context->lanes, p);
        p += 32;
        length -= 32;
    }
    if (length > 0) memcpy(context->buffer, p, length);
    context->buffered = length;
}

uint64_t handoff_xxh64_final(const handoff_xxh64 *context) {
    const uint64_t *v = context->lanes;
    uint64_t hash;
    if (context->length >= 32) {
        hash = rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18);
        for (int i = 0; i < 4; i++) hash = merge(hash, v[i]);
    } else {
        hash = prime5;  // the seed (0) + prime5
    }
    hash += context->length;
    const uint8_t *p = context->buffer;
    size_t left = context->buffered;
    for (; left >= 8; p += 8, left -= 8) {
        hash ^= round64(0, load64(p));
        hash = rotl(hash, 27) * prime1 + prime4;
    }
    if (left >= 4) {
        hash ^= (uint64_t)load32(p) * prime1;
        hash = rotl(hash, 23) * prime2 + prime3;
        p += 4;
        left -= 4;
    }
    for (; left > 0; p++, left--) {
        hash ^= *p * prime5;
        hash = rotl(hash, 11) * prime1;
    }
    hash ^= hash >> 33;
    hash *= prime2;
    hash ^= hash >> 29;
    hash *= prime3;
    hash ^= hash >> 32;
    return hash;
}
