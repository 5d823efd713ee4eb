#ifndef HANDOFF_CHECKSUM_H
#define HANDOFF_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of `length` bytes, continuing from
/// `previous` (0 to start). Same convention as zlib's crc32(): feeding a buffer in pieces gives the
/// same result as feeding it whole. Uses the fastest implementation the CPU runs (see below).
uint32_t handoff_crc32c(uint32_t previous, const void *data, size_t length);

/// The same CRC-32C computed with tables only, whatever the CPU: the reference the fast path is
/// tested against.
uint32_t handoff_crc32c_portable(uint32_t previous, const void *data, size_t length);

/// Copies `length` bytes from `source` to `destination` (which must not overlap) and returns the
/// CRC-32C of them continuing from `previous`, in one pass over the data.
uint32_t handoff_crc32c_copy(uint32_t previous, void *destination, const void *source, size_t length);

/// The ways this library computes CRC-32C, slowest first.
/// Slicing-by-8 tables: any CPU.
#define HANDOFF_CRC32C_TABLES 0
/// Three interleaved chains of the SSE4.2 crc32 instruction.
#define HANDOFF_CRC32C_LANES 1
/// Carry-less multiplication folding 256 bytes at a time in 32-byte registers (AVX2 VPCLMULQDQ),
/// then the lanes.
#define HANDOFF_CRC32C_FOLDING_256 2
/// The same folding in 64-byte registers (AVX-512 VPCLMULQDQ), then the lanes.
#define HANDOFF_CRC32C_FOLDING_512 3

/// The fastest implementation this CPU runs, which handoff_crc32c and handoff_crc32c_copy use.
int handoff_crc32c_implementation(void);

/// handoff_crc32c with a given implementation (or the fastest this CPU has, if it lacks that one):
/// how tests check every implementation against the tables, and benchmarks compare them.
uint32_t handoff_crc32c_using(int implementation, uint32_t previous, const void *data, size_t length);

/// handoff_crc32c_copy with a given implementation, as handoff_crc32c_using.
uint32_t handoff_crc32c_copy_using(int implementation, uint32_t previous, void *destination, const void *source, size_t length);

/// SHA-256 (FIPS 180-4) in pieces: init, update with the data in any number of pieces, final.
typedef struct handoff_sha256 {
    uint32_t state[8];
    /// How its rounds are computed (HANDOFF_SHA256_…), set by init.
    int implementation;
    uint64_t length;
    uint8_t buffer[64];
    size_t buffered;
} handoff_sha256;

void handoff_sha256_init(handoff_sha256 *context);
void handoff_sha256_update(handoff_sha256 *context, const void *data, size_t length);
void handoff_sha256_final(handoff_sha256 *context, uint8_t digest[32]);

/// The ways this library computes SHA-256's rounds, slowest first.
/// Portable C: any CPU.
#define HANDOFF_SHA256_PORTABLE 0
/// The x86 SHA extensions (sha256rnds2, sha256msg1, sha256msg2).
#define HANDOFF_SHA256_EXTENSIONS 1

/// The fastest implementation this CPU runs, which handoff_sha256_init chooses.
int handoff_sha256_implementation(void);

/// handoff_sha256_init with a given implementation for the context's rounds (or the fastest this
/// CPU has, if it lacks that one): how tests check the extensions against the portable rounds, and
/// benchmarks compare them.
void handoff_sha256_init_using(int implementation, handoff_sha256 *context);

/// XXH64 with seed 0 in pieces: init, update with the data in any number of pieces, final (which
/// leaves the context as it was, so a running hash can be read and continued).
typedef struct handoff_xxh64 {
    uint64_t lanes[4];
    uint64_t length;
    uint8_t buffer[32];
    size_t buffered;
} handoff_xxh64;

void handoff_xxh64_init(handoff_xxh64 *context);
void handoff_xxh64_update(handoff_xxh64 *context, const void *data, size_t length);
uint64_t handoff_xxh64_final(const handoff_xxh64 *context);

#endif
