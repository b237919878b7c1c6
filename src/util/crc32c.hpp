// CRC32C (Castagnoli), as used by iSCSI, ext4 and leveldb. Through ISA-L in a
// build with it; else hardware-accelerated with SSE4.2 (three interleaved
// streams) where the CPU has it, slicing-by-8 otherwise; all give identical
// results.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cairn::crc32c {

// CRC32C of [data, data+n) continuing from `crc` (0 to start).
uint32_t Extend(uint32_t crc, const void* data, size_t n);
inline uint32_t Value(const void* data, size_t n) { return Extend(0, data, n); }
// CRC32C of A || B from crc_a = Value(A), crc_b = Value(B) and |B|, without
// the data (zlib's crc32_combine): pieces checked out of order, e.g. the
// chunks of an XOR rebuild (docs/mpi.md), give the whole's CRC.
uint32_t Combine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b);
// True when a hardware path is in use (ISA-L's, or SSE4.2's).
bool IsHardwareAccelerated();

// Internal: the portable slicing-by-8 path, whatever the CPU. Exposed so that
// tests can check the hardware path against it.
uint32_t ExtendPortable(uint32_t crc, const void* data, size_t n);
// Internal: Cairn's own path (SSE4.2 where the CPU has it, else
// slicing-by-8), whatever the build: what ISA-L's replaces in a build with
// it (cairn-crc-cost compares the two; the tests check it too).
uint32_t ExtendOwn(uint32_t crc, const void* data, size_t n);

}  // namespace cairn::crc32c
