#ifndef HANDOFF_CHECKSUM_H
#define HANDOFF_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of `length` bytes, continuing from
/// `previous` (0 to start). Same convention as zlib's crc32(): feeding a buffer in pieces gives the
/// same result as feeding it whole. Uses the SSE4.2 crc32 instruction when the CPU has it.
uint32_t handoff_crc32c(uint32_t previous, const void *data, size_t length);

/// Whether handoff_crc32c runs on the CPU's crc32 instruction (1) or on tables (0).
int handoff_crc32c_is_hardware(void);

#endif
