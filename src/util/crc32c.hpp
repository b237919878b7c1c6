// CRC32C (Castagnoli), as used by iSCSI, ext4 and leveldb. Hardware-accelerated
// with SSE4.2 (three interleaved streams) where the CPU has it, slicing-by-8
// otherwise; both give identical results.
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
// True when the hardware path is in use.
bool IsHardwareAccelerated();

// Internal: the portable slicing-by-8 path, whatever the CPU. Exposed so that
// tests can check the hardware path against it.
uint32_t ExtendPortable(uint32_t crc, const void* data, size_t n);

}  // namespace cairn::crc32c
