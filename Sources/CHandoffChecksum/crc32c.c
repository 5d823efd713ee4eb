#include "handoff_checksum.h"

#include <string.h>

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
static uint32_t long_shift, short_shift;
static int shifts_ready;

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
    long_shift = single_lane(0x80000000u, zeros, LONG_LANE);    // x^0 times x^(8 * LONG_LANE)
    short_shift = single_lane(0x80000000u, zeros, SHORT_LANE);
    __atomic_store_n(&shifts_ready, 1, __ATOMIC_RELEASE);
}

// Three independent chains of 8-byte crc32 instructions: the instruction's latency is three cycles
// but it issues every cycle, so three lanes run about three times as fast as one.
__attribute__((target("sse4.2"))) static uint32_t three_lanes(uint32_t crc, const unsigned char **data, size_t *length,
                                                              size_t lane, uint32_t shift) {
    const unsigned char *p = *data;
    size_t n = *length;
    while (n >= 3 * lane) {
        uint64_t c0 = crc, c1 = 0, c2 = 0;
        for (size_t i = 0; i < lane; i += 8) {
            uint64_t w0, w1, w2;
            memcpy(&w0, p + i, 8);
            memcpy(&w1, p + lane + i, 8);
            memcpy(&w2, p + 2 * lane + i, 8);
            c0 = __builtin_ia32_crc32di(c0, w0);
            c1 = __builtin_ia32_crc32di(c1, w1);
            c2 = __builtin_ia32_crc32di(c2, w2);
        }
        crc = multiply_mod_p(shift, multiply_mod_p(shift, (uint32_t)c0) ^ (uint32_t)c1) ^ (uint32_t)c2;
        p += 3 * lane;
        n -= 3 * lane;
    }
    *data = p;
    *length = n;
    return crc;
}

// three_lanes, also copying every word it reads to `out`: one pass over the data instead of two.
__attribute__((target("sse4.2"))) static uint32_t three_lanes_copy(uint32_t crc, const unsigned char **data, unsigned char **out,
                                                                   size_t *length, size_t lane, uint32_t shift) {
    const unsigned char *p = *data;
    unsigned char *q = *out;
    size_t n = *length;
    while (n >= 3 * lane) {
        uint64_t c0 = crc, c1 = 0, c2 = 0;
        for (size_t i = 0; i < lane; i += 8) {
            uint64_t w0, w1, w2;
            memcpy(&w0, p + i, 8);
            memcpy(&w1, p + lane + i, 8);
            memcpy(&w2, p + 2 * lane + i, 8);
            memcpy(q + i, &w0, 8);
            memcpy(q + lane + i, &w1, 8);
            memcpy(q + 2 * lane + i, &w2, 8);
            c0 = __builtin_ia32_crc32di(c0, w0);
            c1 = __builtin_ia32_crc32di(c1, w1);
            c2 = __builtin_ia32_crc32di(c2, w2);
        }
        crc = multiply_mod_p(shift, multiply_mod_p(shift, (uint32_t)c0) ^ (uint32_t)c1) ^ (uint32_t)c2;
        p += 3 * lane;
        q += 3 * lane;
        n -= 3 * lane;
    }
    *data = p;
    *out = q;
    *length = n;
    return crc;
}

static uint32_t hardware_copy(uint32_t crc, unsigned char *q, const unsigned char *p, size_t n) {
    if (!__atomic_load_n(&shifts_ready, __ATOMIC_ACQUIRE)) prepare_shifts();
    crc = three_lanes_copy(crc, &p, &q, &n, LONG_LANE, long_shift);
    crc = three_lanes_copy(crc, &p, &q, &n, SHORT_LANE, short_shift);
    memcpy(q, p, n);
    return single_lane(crc, p, n);
}

static uint32_t hardware(uint32_t crc, const unsigned char *p, size_t n) {
    if (!__atomic_load_n(&shifts_ready, __ATOMIC_ACQUIRE)) prepare_shifts();
    crc = three_lanes(crc, &p, &n, LONG_LANE, long_shift);
    crc = three_lanes(crc, &p, &n, SHORT_LANE, short_shift);
    return single_lane(crc, p, n);
}
#endif

static int use_hardware = -1;

int handoff_crc32c_is_hardware(void) {
    if (use_hardware < 0) {
#if defined(__x86_64__)
        __builtin_cpu_init();
        use_hardware = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#else
        use_hardware = 0;
#endif
    }
    return use_hardware;
}

uint32_t handoff_crc32c_portable(uint32_t previous, const void *data, size_t length) {
    return ~software(~previous, data, length);
}

uint32_t handoff_crc32c(uint32_t previous, const void *data, size_t length) {
    uint32_t crc = ~previous;
    const unsigned char *p = data;
#if defined(__x86_64__)
    if (handoff_crc32c_is_hardware()) return ~hardware(crc, p, length);
#endif
    return ~software(crc, p, length);
}

uint32_t handoff_crc32c_copy(uint32_t previous, void *destination, const void *source, size_t length) {
#if defined(__x86_64__)
    if (handoff_crc32c_is_hardware()) return ~hardware_copy(~previous, destination, source, length);
#endif
    memcpy(destination, source, length);
    return handoff_crc32c(previous, destination, length);
}
