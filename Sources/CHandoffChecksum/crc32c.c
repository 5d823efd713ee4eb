#include "handoff_checksum.h"

#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define POLY 0x82F63B78u

// Slicing-by-8 tables, built once: table[k][b] is the CRC of byte b followed by k zero bytes.
static uint32_t table[8][256];
static int table_ready;

static void build_tables(void) {
    for (uint32_t byte = 0; byte < 256; byte++) {
        uint32_t crc = byte;
        for (int bit = 0; bit < 8; bit++) crc = (crc >> 1) ^ (POLY & (0u - (crc & 1u)));
        table[0][byte] = crc;
    }
    for (uint32_t byte = 0; byte < 256; byte++) {
        for (int k = 1; k < 8; k++) table[k][byte] = (table[k - 1][byte] >> 8) ^ table[0][table[k - 1][byte] & 0xFF];
    }
    __atomic_store_n(&table_ready, 1, __ATOMIC_RELEASE);
}

static uint32_t software(uint32_t crc, const unsigned char *p, size_t n) {
    if (!__atomic_load_n(&table_ready, __ATOMIC_ACQUIRE)) build_tables();
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        word ^= crc;  // little-endian: the CRC folds into the first four bytes
        crc = table[7][word & 0xFF] ^ table[6][(word >> 8) & 0xFF] ^ table[5][(word >> 16) & 0xFF] ^
              table[4][(word >> 24) & 0xFF] ^ table[3][(word >> 32) & 0xFF] ^ table[2][(word >> 40) & 0xFF] ^
              table[1][(word >> 48) & 0xFF] ^ table[0][word >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xFF];
    return crc;
}

// a * b modulo P, both in the reflected representation the CRC register uses (bit 31 is x^0).
static uint32_t multiply_mod_p(uint32_t a, uint32_t b) {
    uint32_t product = 0;
    for (int i = 0; i < 32; i++) {
        if (a & 0x80000000u) product ^= b;  // a has x^i: add b * x^i
        a <<= 1;
        b = (b & 1u) ? (b >> 1) ^ POLY : b >> 1;  // b *= x
    }
    return product;
}

#if defined(__x86_64__)
// Lane lengths for the three-way interleaved loop, and x^(8 * length) mod P for each: running the
// CRC register r over `length` zero bytes multiplies it by that constant, which is how the lanes,
// computed independently, are joined: crc(r, A B) = r_A * x^(8|B|) xor crc(0, B).
#define LONG_LANE 4096
#define SHORT_LANE 256
// The joins go by table: multiplying by a constant mod P is linear in the other factor, so
// byte[k][b] holds the product of byte b at byte position k, and a 32-bit value's product is the
// exclusive or of four lookups. multiply_mod_p is a chain of 32 dependent steps; two of them per
// three lanes of 4 KiB cost about a sixth of the checksum's time (21.9 GB/s with it, 25.7 with the
// tables, one 256 KiB chunk in cache on the 2-core VM's AMD EPYC, 2026-12-06). Filled once, by
// handoff_crc32c_implementation, before it names an implementation that uses them.
typedef struct {
    uint32_t byte[4][256];
} shift_table;
static shift_table long_table, short_table;

static inline uint32_t shifted(const shift_table *table, uint32_t a) {
    return table->byte[0][a & 0xFF] ^ table->byte[1][(a >> 8) & 0xFF] ^ table->byte[2][(a >> 16) & 0xFF] ^ table->byte[3][a >> 24];
}

static void fill(shift_table *table, uint32_t shift) {
    for (int k = 0; k < 4; k++) {
        for (uint32_t byte = 0; byte < 256; byte++) table->byte[k][byte] = multiply_mod_p(shift, byte << (8 * k));
    }
}

__attribute__((target("sse4.2"))) static uint32_t single_lane(uint32_t c32, const unsigned char *p, size_t n) {
    uint64_t c = c32;
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = __builtin_ia32_crc32di(c, word);
        p += 8;
        n -= 8;
    }
    c32 = (uint32_t)c;
    while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}

__attribute__((target("sse4.2"))) static void prepare_shifts(void) {
    static const unsigned char zeros[LONG_LANE];
    fill(&long_table, single_lane(0x80000000u, zeros, LONG_LANE));  // x^0 times x^(8 * LONG_LANE)
    fill(&short_table, single_lane(0x80000000u, zeros, SHORT_LANE));
}

// Three independent chains of 8-byte crc32 instructions: the instruction's latency is three cycles
// but it issues every cycle, so three lanes run about three times as fast as one. With `out`, every
// word read is also copied there: one pass over the data instead of two. (Always inlined into the
// two wrappers below, so the check of `out` is decided at compile time.)
#define LANES_TARGET __attribute__((target("sse4.2")))
LANES_TARGET static inline __attribute__((always_inline)) uint32_t lanes(uint32_t crc, const unsigned char **data, unsigned char **out,
                                                                        size_t *length, size_t lane, const shift_table *shift) {
    const unsigned char *p = *data;
    unsigned char *q = out ? *out : NULL;
    size_t n = *length;
    while (n >= 3 * lane) {
        uint64_t c0 = crc, c1 = 0, c2 = 0;
        for (size_t i = 0; i < lane; i += 8) {
            uint64_t w0, w1, w2;
            memcpy(&w0, p + i, 8);
            memcpy(&w1, p + lane + i, 8);
            memcpy(&w2, p + 2 * lane + i, 8);
            if (out) {
                memcpy(q + i, &w0, 8);
                memcpy(q + lane + i, &w1, 8);
                memcpy(q + 2 * lane + i, &w2, 8);
            }
            c0 = __builtin_ia32_crc32di(c0, w0);
            c1 = __builtin_ia32_crc32di(c1, w1);
            c2 = __builtin_ia32_crc32di(c2, w2);
        }
        crc = shifted(shift, shifted(shift, (uint32_t)c0) ^ (uint32_t)c1) ^ (uint32_t)c2;
        p += 3 * lane;
        if (out) q += 3 * lane;
        n -= 3 * lane;
    }
    *data = p;
    if (out) *out = q;
    *length = n;
    return crc;
}

LANES_TARGET static uint32_t three_lanes(uint32_t crc, const unsigned char **data, size_t *length, size_t lane, const shift_table *shift) {
    return lanes(crc, data, NULL, length, lane, shift);
}

LANES_TARGET static uint32_t three_lanes_copy(uint32_t crc, const unsigned char **data, unsigned char **out, size_t *length, size_t lane,
                                              const shift_table *shift) {
    return lanes(crc, data, out, length, lane, shift);
}

// MARK: Folding with carry-less multiplication (AVX-512 VPCLMULQDQ)
//
// The message, as a polynomial over GF(2), is congruent modulo P to a shorter one: a 128-bit block H
// followed by F more bits contributes H * x^F, and with H = Hh * x^64 + Hl that is
// Hh * (x^(64+F) mod P) + Hl * (x^F mod P), a polynomial of under 96 bits that can be XORed into the
// block F bits later. Four 64-byte accumulators fold forward 256 bytes at a time; at the end they fold
// into one 16-byte block, whose CRC (two crc32 instructions) is the CRC of everything folded.
//
// In the reflected order the register uses, a 16-byte block loaded little-endian holds Hh reversed in
// its low half and Hl reversed in its high half. A carry-less product of a 64-bit reversed value and a
// constant C reversed in 64 bits (its reflected 32-bit form shifted up by 32) is the reversed product
// one bit short of where it belongs, so each constant carries one factor of x less:
// x^(F+63) mod P for the low half, x^(F-1) mod P for the high half.

// x^n mod P, reflected.
static uint32_t x_power(size_t n) {
    uint32_t r = 0x80000000u;
    while (n--) r = (r & 1u) ? (r >> 1) ^ POLY : r >> 1;
    return r;
}

// The constant pair that folds a 16-byte block forward by `bytes`: low qword for the block's low half.
struct fold_constant {
    uint64_t low, high;
};

static struct fold_constant fold_by(size_t bytes) {
    size_t bits = 8 * bytes;
    return (struct fold_constant){(uint64_t)x_power(bits + 63) << 32, (uint64_t)x_power(bits - 1) << 32};
}

// Folding distances: 256 bytes (the loop), 64 bytes (accumulator into accumulator), 48, 32, 16 bytes
// (the last accumulator's four blocks into its last). Computed once, as the lanes' shifts.
static struct fold_constant fold_256, fold_64, fold_48, fold_32, fold_16;

static void prepare_folds(void) {
    fold_256 = fold_by(256);
    fold_64 = fold_by(64);
    fold_48 = fold_by(48);
    fold_32 = fold_by(32);
    fold_16 = fold_by(16);
}

#define FOLD_TARGET __attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.2")))

FOLD_TARGET static inline __m512i broadcast(struct fold_constant k) {
    return _mm512_broadcast_i32x4(_mm_set_epi64x((long long)k.high, (long long)k.low));
}

// acc folded forward by k, XORed with `next`: one step of every 16-byte lane at once.
FOLD_TARGET static inline __m512i fold512(__m512i acc, __m512i k, __m512i next) {
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(acc, k, 0x00), _mm512_clmulepi64_epi128(acc, k, 0x11), next, 0x96);
}

// Shared by both widths: its target is a subset of each, so either inlines it.
__attribute__((target("pclmul,sse4.2"))) static inline __m128i fold128(__m128i block, struct fold_constant k) {
    __m128i constant = _mm_set_epi64x((long long)k.high, (long long)k.low);
    return _mm_xor_si128(_mm_clmulepi64_si128(block, constant, 0x00), _mm_clmulepi64_si128(block, constant, 0x11));
}

// The CRC register after the four accumulators (256 bytes, in order), which hold everything folded.
FOLD_TARGET static uint32_t fold_finish(__m512i a0, __m512i a1, __m512i a2, __m512i a3) {
    __m512i k64 = broadcast(fold_64);
    a1 = fold512(a0, k64, a1);
    a2 = fold512(a1, k64, a2);
    a3 = fold512(a2, k64, a3);
    __m128i last = _mm512_extracti32x4_epi32(a3, 3);
    last = _mm_xor_si128(last, fold128(_mm512_extracti32x4_epi32(a3, 0), fold_48));
    last = _mm_xor_si128(last, fold128(_mm512_extracti32x4_epi32(a3, 1), fold_32));
    last = _mm_xor_si128(last, fold128(_mm512_extracti32x4_epi32(a3, 2), fold_16));
    uint64_t c = __builtin_ia32_crc32di(0, (uint64_t)_mm_cvtsi128_si64(last));
    return (uint32_t)__builtin_ia32_crc32di(c, (uint64_t)_mm_extract_epi64(last, 1));
}

// 64 bytes at p + at, also stored at q + at unless q is NULL.
FOLD_TARGET static inline __m512i take(const unsigned char *p, unsigned char *q, size_t at) {
    __m512i block = _mm512_loadu_si512(p + at);
    if (q) _mm512_storeu_si512(q + at, block);
    return block;
}

// Folds the longest prefix of whole 256-byte blocks (when there are at least two) and returns the CRC
// register after it; `data` and `length` move past it. With `out`, what it reads is also copied
// there (always inlined into the two wrappers below, as `lanes`).
FOLD_TARGET static inline __attribute__((always_inline)) uint32_t folding(uint32_t crc, const unsigned char **data, unsigned char **out,
                                                                         size_t *length) {
    const unsigned char *p = *data;
    unsigned char *q = out ? *out : NULL;
    size_t n = *length;
    if (n < 512) return crc;
    // The register joins the message's first bytes; the first 256 bytes are the accumulators.
    __m512i a0 = _mm512_xor_si512(take(p, q, 0), _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)crc)));
    __m512i a1 = take(p, q, 64), a2 = take(p, q, 128), a3 = take(p, q, 192);
    __m512i k = broadcast(fold_256);
    for (p += 256, q = q ? q + 256 : NULL, n -= 256; n >= 256; p += 256, q = q ? q + 256 : NULL, n -= 256) {
        a0 = fold512(a0, k, take(p, q, 0));
        a1 = fold512(a1, k, take(p, q, 64));
        a2 = fold512(a2, k, take(p, q, 128));
        a3 = fold512(a3, k, take(p, q, 192));
    }
    *data = p;
    if (out) *out = q;
    *length = n;
    return fold_finish(a0, a1, a2, a3);
}

FOLD_TARGET static uint32_t fold(uint32_t crc, const unsigned char **data, size_t *length) { return folding(crc, data, NULL, length); }

FOLD_TARGET static uint32_t fold_copy(uint32_t crc, const unsigned char **data, unsigned char **out, size_t *length) {
    return folding(crc, data, out, length);
}

// MARK: The same folding 256 bits at a time (AVX2 VPCLMULQDQ)
//
// For CPUs with VPCLMULQDQ but no AVX-512 (AMD Zen 3, Intel's client cores since Alder Lake): the same
// 256 bytes a step, as eight 32-byte accumulators of two 16-byte lanes each, folded forward by the
// same constant; at the end each folds 32 bytes into the next, and the last one's low lane 16 bytes
// into its high lane. On a Zen 3 VM the crc32 lanes alone checksum 17 GB/s in cache.

#define FOLD256_TARGET __attribute__((target("avx2,vpclmulqdq,pclmul,sse4.2")))

FOLD256_TARGET static inline __m256i broadcast256(struct fold_constant k) {
    return _mm256_broadcastsi128_si256(_mm_set_epi64x((long long)k.high, (long long)k.low));
}

FOLD256_TARGET static inline __m256i fold256(__m256i acc, __m256i k, __m256i next) {
    return _mm256_xor_si256(_mm256_xor_si256(_mm256_clmulepi64_epi128(acc, k, 0x00), _mm256_clmulepi64_epi128(acc, k, 0x11)), next);
}

// 32 bytes at p + at, also stored at q + at unless q is NULL.
FOLD256_TARGET static inline __m256i take256(const unsigned char *p, unsigned char *q, size_t at) {
    __m256i block = _mm256_loadu_si256((const __m256i *)(p + at));
    if (q) _mm256_storeu_si256((__m256i *)(q + at), block);
    return block;
}

// `folding` with 32-byte registers (same contract).
FOLD256_TARGET static inline __attribute__((always_inline)) uint32_t folding256(uint32_t crc, const unsigned char **data, unsigned char **out,
                                                                               size_t *length) {
    const unsigned char *p = *data;
    unsigned char *q = out ? *out : NULL;
    size_t n = *length;
    if (n < 512) return crc;
    __m256i a0 = _mm256_xor_si256(take256(p, q, 0), _mm256_inserti128_si256(_mm256_setzero_si256(), _mm_cvtsi32_si128((int)crc), 0));
    __m256i a1 = take256(p, q, 32), a2 = take256(p, q, 64), a3 = take256(p, q, 96);
    __m256i a4 = take256(p, q, 128), a5 = take256(p, q, 160), a6 = take256(p, q, 192), a7 = take256(p, q, 224);
    __m256i k = broadcast256(fold_256);
    for (p += 256, q = q ? q + 256 : NULL, n -= 256; n >= 256; p += 256, q = q ? q + 256 : NULL, n -= 256) {
        a0 = fold256(a0, k, take256(p, q, 0));
        a1 = fold256(a1, k, take256(p, q, 32));
        a2 = fold256(a2, k, take256(p, q, 64));
        a3 = fold256(a3, k, take256(p, q, 96));
        a4 = fold256(a4, k, take256(p, q, 128));
        a5 = fold256(a5, k, take256(p, q, 160));
        a6 = fold256(a6, k, take256(p, q, 192));
        a7 = fold256(a7, k, take256(p, q, 224));
    }
    *data = p;
    if (out) *out = q;
    *length = n;
    __m256i k32 = broadcast256(fold_32);
    a1 = fold256(a0, k32, a1);
    a2 = fold256(a1, k32, a2);
    a3 = fold256(a2, k32, a3);
    a4 = fold256(a3, k32, a4);
    a5 = fold256(a4, k32, a5);
    a6 = fold256(a5, k32, a6);
    a7 = fold256(a6, k32, a7);
    __m128i last = _mm_xor_si128(_mm256_extracti128_si256(a7, 1), fold128(_mm256_castsi256_si128(a7), fold_16));
    uint64_t c = __builtin_ia32_crc32di(0, (uint64_t)_mm_cvtsi128_si64(last));
    return (uint32_t)__builtin_ia32_crc32di(c, (uint64_t)_mm_extract_epi64(last, 1));
}

FOLD256_TARGET static uint32_t fold256_plain(uint32_t crc, const unsigned char **data, size_t *length) {
    return folding256(crc, data, NULL, length);
}

FOLD256_TARGET static uint32_t fold256_copy(uint32_t crc, const unsigned char **data, unsigned char **out, size_t *length) {
    return folding256(crc, data, out, length);
}

// The interleaved crc32 instructions, after folding when `implementation` folds (the longest run of
// 256-byte blocks first, then lanes of 4 KiB and 256 bytes, then 8 bytes at a time); copying to `q`
// as it reads unless `q` is NULL.
static uint32_t hardware(int implementation, uint32_t crc, unsigned char *q, const unsigned char *p, size_t n) {
    if (implementation == HANDOFF_CRC32C_FOLDING_512) crc = q ? fold_copy(crc, &p, &q, &n) : fold(crc, &p, &n);
    if (implementation == HANDOFF_CRC32C_FOLDING_256) crc = q ? fold256_copy(crc, &p, &q, &n) : fold256_plain(crc, &p, &n);
    crc = q ? three_lanes_copy(crc, &p, &q, &n, LONG_LANE, &long_table) : three_lanes(crc, &p, &n, LONG_LANE, &long_table);
    crc = q ? three_lanes_copy(crc, &p, &q, &n, SHORT_LANE, &short_table) : three_lanes(crc, &p, &n, SHORT_LANE, &short_table);
    if (q) memcpy(q, p, n);
    return single_lane(crc, p, n);
}
#endif

// The fastest implementation found, once its constants are ready (-1 until then).
static int best = -1;

int handoff_crc32c_implementation(void) {
    int found = __atomic_load_n(&best, __ATOMIC_ACQUIRE);
    if (found >= 0) return found;
    found = HANDOFF_CRC32C_TABLES;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        prepare_shifts();
        found = HANDOFF_CRC32C_LANES;
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("pclmul")) {
            prepare_folds();
            found = HANDOFF_CRC32C_FOLDING_256;
            if (__builtin_cpu_supports("avx512f")) found = HANDOFF_CRC32C_FOLDING_512;
        }
    }
#endif
    // Released after the constants: a caller that reads it sees them. (Racing callers compute the
    // same constants and store the same value.)
    __atomic_store_n(&best, found, __ATOMIC_RELEASE);
    return found;
}

uint32_t handoff_crc32c_using(int implementation, uint32_t previous, const void *data, size_t length) {
    int fastest = handoff_crc32c_implementation();
    if (implementation > fastest) implementation = fastest;
#if defined(__x86_64__)
    if (implementation >= HANDOFF_CRC32C_LANES) return ~hardware(implementation, ~previous, NULL, data, length);
#endif
    return ~software(~previous, data, length);
}

uint32_t handoff_crc32c_copy_using(int implementation, uint32_t previous, void *destination, const void *source, size_t length) {
    int fastest = handoff_crc32c_implementation();
    if (implementation > fastest) implementation = fastest;
#if defined(__x86_64__)
    if (implementation >= HANDOFF_CRC32C_LANES)
        return ~hardware(implementation, ~previous, destination, source, length);
#endif
    memcpy(destination, source, length);
    return ~software(~previous, destination, length);
}

uint32_t handoff_crc32c_portable(uint32_t previous, const void *data, size_t length) {
    return ~software(~previous, data, length);
}

uint32_t handoff_crc32c(uint32_t previous, const void *data, size_t length) {
    return handoff_crc32c_using(handoff_crc32c_implementation(), previous, data, length);
}

uint32_t handoff_crc32c_copy(uint32_t previous, void *destination, const void *source, size_t length) {
    return handoff_crc32c_copy_using(handoff_crc32c_implementation(), previous, destination, source, length);
}
