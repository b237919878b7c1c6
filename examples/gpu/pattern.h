// The content of version `v` of the example's array: a value per (index,
// version), computed identically by the fill kernel and the host check.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define CAIRN_EXAMPLE_HD __host__ __device__
#else
#define CAIRN_EXAMPLE_HD
#endif

CAIRN_EXAMPLE_HD inline uint32_t ExampleValue(uint64_t index, uint32_t version) {
  uint64_t x = index * 0x9e3779b97f4a7c15ull + version * 0xbf58476d1ce4e5b9ull + 1;
  x ^= x >> 31;
  x *= 0x94d049bb133111ebull;
  return static_cast<uint32_t>(x ^ (x >> 29));
}

// Launches the fill kernel on the default stream: a[i] = ExampleValue(i, v).
// Returns the launch's cudaError_t (as int, so that this header needs no
// CUDA header).
int LaunchFill(uint32_t* a, uint64_t n, uint32_t version);
