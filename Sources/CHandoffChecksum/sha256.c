// SHA-256 (FIPS 180-4), for document activities (a continuing node opens its own copy of a
// document only when its hash matches the one the originator advertised) and for streams that end
// with it. Plain C, no library; on x86-64 CPUs with the SHA extensions (Intel since Goldmont and
// Ice Lake, AMD since Zen) the rounds run on them, about seven times the portable rounds' speed.
#include <string.h>
#include "handoff_checksum.h"
#if defined(__x86_64__)
#include <immintrin.h>
#endif

static const uint32_t k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void compress(uint32_t state[8], const uint8_t block[64]) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++) {
        w[i] = (uint32_t)block[4 * i] << 24 | (uint32_t)block[4 * i + 1] << 16 | (uint32_t)block[4 * i + 2] << 8 | block[4 * i + 3];
    }
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3], e = state[4], f = state[5], g = state[6], h = state[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    state[0] += a; state[1] += b; state[2] += c; state[3] += d;
    state[4] += e; state[5] += f; state[6] += g; state[7] += h;
}

#if defined(__x86_64__)
// The SHA extensions' rounds (sha256rnds2 runs two rounds; sha256msg1 and sha256msg2 extend the
// message schedule four words at a time). They keep the state as two registers, ABEF and CDGH,
// and each group of four rounds takes four schedule words plus their constants: the first half
// for two rounds in the low 64 bits, then the high half moved down for the next two.
__attribute__((target("sha,sse4.1,ssse3")))
static void compress_extensions(uint32_t state[8], const uint8_t *blocks, size_t count) {
    // Each big-endian word of a block to a little-endian lane.
    const __m128i byteswap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i dcba = _mm_loadu_si128((const __m128i *)&state[0]);
    __m128i hgfe = _mm_loadu_si128((const __m128i *)&state[4]);
    __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
    __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
    for (; count > 0; count--, blocks += 64) {
        const __m128i abefBefore = abef, cdghBefore = cdgh;
        __m128i schedule[4];
        for (int i = 0; i < 4; i++) schedule[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(blocks + 16 * i)), byteswap);
        for (int group = 0; group < 16; group++) {
            const __m128i words = schedule[group % 4];
            __m128i message = _mm_add_epi32(words, _mm_loadu_si128((const __m128i *)&k[4 * group]));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, message);
            if (group >= 3 && group < 15) {
                // The next group's words: W[t] = σ1(W[t-2]) + W[t-7] + σ0(W[t-15]) + W[t-16], the
                // σ0 part added by sha256msg1 three groups ago.
                __m128i *next = &schedule[(group + 1) % 4];
                *next = _mm_add_epi32(*next, _mm_alignr_epi8(words, schedule[(group + 3) % 4], 4));
                *next = _mm_sha256msg2_epu32(*next, words);
            }
            message = _mm_shuffle_epi32(message, 0x0E);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, message);
            if (group >= 1 && group < 13) {
                __m128i *earlier = &schedule[(group + 3) % 4];
                *earlier = _mm_sha256msg1_epu32(*earlier, words);
            }
        }
        abef = _mm_add_epi32(abef, abefBefore);
        cdgh = _mm_add_epi32(cdgh, cdghBefore);
    }
    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)&state[0], _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)&state[4], _mm_alignr_epi8(dchg, feba, 8));
}
#endif

int handoff_sha256_implementation(void) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sha") && __builtin_cpu_supports("sse4.1") && __builtin_cpu_supports("ssse3")) return HANDOFF_SHA256_EXTENSIONS;
#endif
    return HANDOFF_SHA256_PORTABLE;
}

// Computed once; a race to compute it stores the same value.
static int chosen = -1;

static int fastest(void) {
    int implementation = __atomic_load_n(&chosen, __ATOMIC_RELAXED);
    if (implementation < 0) {
        implementation = handoff_sha256_implementation();
        __atomic_store_n(&chosen, implementation, __ATOMIC_RELAXED);
    }
    return implementation;
}

static void compress_blocks(int implementation, uint32_t state[8], const uint8_t *blocks, size_t count) {
#if defined(__x86_64__)
    if (implementation == HANDOFF_SHA256_EXTENSIONS) {
        compress_extensions(state, blocks, count);
        return;
    }
#endif
    for (; count > 0; count--, blocks += 64) compress(state, blocks);
}

void handoff_sha256_init(handoff_sha256 *context) {
    handoff_sha256_init_using(fastest(), context);
}

void handoff_sha256_init_using(int implementation, handoff_sha256 *context) {
    static const uint32_t initial[8] = {
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
    };
    int available = fastest();
    memcpy(context->state, initial, sizeof initial);
    context->implementation = implementation < available ? implementation : available;
    context->length = 0;
    context->buffered = 0;
}

void handoff_sha256_update(handoff_sha256 *context, const void *data, size_t length) {
    const uint8_t *bytes = data;
    context->length += length;
    if (context->buffered > 0) {
        size_t take = 64 - context->buffered < length ? 64 - context->buffered : length;
        memcpy(context->buffer + context->buffered, bytes, take);
        context->buffered += take;
        bytes += take;
        length -= take;
        if (context->buffered < 64) return;
        compress_blocks(context->implementation, context->state, context->buffer, 1);
        context->buffered = 0;
    }
    compress_blocks(context->implementation, context->state, bytes, length / 64);
    bytes += length / 64 * 64;
    length %= 64;
    memcpy(context->buffer, bytes, length);
    context->buffered = length;
}

void handoff_sha256_final(handoff_sha256 *context, uint8_t digest[32]) {
    uint64_t bits = context->length * 8;
    uint8_t pad = 0x80;
    handoff_sha256_update(context, &pad, 1);
    uint8_t zero = 0;
    while (context->buffered != 56) handoff_sha256_update(context, &zero, 1);
    uint8_t length[8];
    for (int i = 0; i < 8; i++) length[i] = (uint8_t)(bits >> (56 - 8 * i));
    handoff_sha256_update(context, length, 8);
    for (int i = 0; i < 8; i++) {
        digest[4 * i] = (uint8_t)(context->state[i] >> 24);
        digest[4 * i + 1] = (uint8_t)(context->state[i] >> 16);
        digest[4 * i + 2] = (uint8_t)(context->state[i] >> 8);
        digest[4 * i + 3] = (uint8_t)context->state[i];
    }
}
