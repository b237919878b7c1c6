// The example's only device code: one kernel that writes version `v` of the
// array (pattern.h).
#include <cuda_runtime.h>

#include "pattern.h"

namespace {
__global__ void Fill(uint32_t* a, uint64_t n, uint32_t version) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    a[i] = ExampleValue(i, version);
  }
}
}  // namespace

int LaunchFill(uint32_t* a, uint64_t n, uint32_t version) {
  Fill<<<256, 256>>>(a, n, version);
  return static_cast<int>(cudaGetLastError());
}
