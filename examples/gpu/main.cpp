// cairn-gpu-example: checkpoint and restore a CUDA device array with Cairn.
//
//   cairn-gpu-example [--mib N] [--versions V] [--device-cache SIZE] [--dir DIR]
//
// Allocates N MiB with cudaMalloc, and for each version v: fills the array
// with a kernel (pattern.h), Checkpoint("gpu-example", v). Then waits for the
// last version to reach the local directory, clobbers the array
// (cudaMemset), restores the latest version and the one before it (Cairn keeps
// two by default) and checks every element against the host's computation.
// Exit 0 when both restores are right, 1 on a mismatch or a failed call.
// Needs a CUDA GPU and a Cairn built with the GPU tier (docs/gpu.md).
#include <cuda_runtime.h>
#include <stdlib.h>  // mkdtemp

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cairn/cairn.hpp"
#include "pattern.h"

namespace {

constexpr const char* kName = "gpu-example";

bool CudaOk(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "cairn-gpu-example: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

bool CairnOk(const cairn::Status& st, const char* what) {
  if (st.ok()) return true;
  std::fprintf(stderr, "cairn-gpu-example: %s: %s\n", what, st.ToString().c_str());
  return false;
}

// Copies the device array back and compares it with version `v`.
bool Check(const uint32_t* dev, uint64_t n, uint32_t v) {
  std::vector<uint32_t> host(n);
  if (!CudaOk(cudaMemcpy(host.data(), dev, n * sizeof(uint32_t), cudaMemcpyDeviceToHost),
              "cudaMemcpy device->host")) {
    return false;
  }
  for (uint64_t i = 0; i < n; ++i) {
    if (host[i] != ExampleValue(i, v)) {
      std::fprintf(stderr, "cairn-gpu-example: version %u: element %llu is %u, expected %u\n", v,
                   static_cast<unsigned long long>(i), host[i], ExampleValue(i, v));
      return false;
    }
  }
  std::printf("version %u restored and verified (%llu elements)\n", v,
              static_cast<unsigned long long>(n));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t mib = 64;
  uint32_t versions = 4;
  std::string device_cache = "256MiB", dir;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string opt = argv[i];
    if (opt == "--mib") mib = std::strtoull(argv[i + 1], nullptr, 10);
    else if (opt == "--versions") versions = static_cast<uint32_t>(std::strtoul(argv[i + 1], nullptr, 10));
    else if (opt == "--device-cache") device_cache = argv[i + 1];
    else if (opt == "--dir") dir = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: cairn-gpu-example [--mib N] [--versions V] "
                           "[--device-cache SIZE] [--dir DIR]\n");
      return 2;
    }
  }
  if (mib == 0 || versions < 2) {
    std::fprintf(stderr, "cairn-gpu-example: need --mib >= 1 and --versions >= 2\n");
    return 2;
  }
  const uint64_t n = (mib << 20) / sizeof(uint32_t);
  const size_t bytes = n * sizeof(uint32_t);

  // Device 0's primary context becomes current on this thread; Cairn
  // (device = -1) uses the context current where the client is opened.
  if (!CudaOk(cudaSetDevice(0), "cudaSetDevice") || !CudaOk(cudaFree(nullptr), "cudaFree(0)")) {
    return 1;
  }
  uint32_t* dev = nullptr;
  if (!CudaOk(cudaMalloc(&dev, bytes), "cudaMalloc")) return 1;
  std::unique_ptr<uint32_t, decltype(&cudaFree)> guard(dev, &cudaFree);

  cairn::Config config = cairn::DefaultConfig();
  if (dir.empty()) {
    char tmpl[] = "/tmp/cairn-gpu-example-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      std::perror("cairn-gpu-example: mkdtemp");
      return 1;
    }
    dir = tmpl;
  }
  config.scratch_dir = dir;
  config.persistent_dir.clear();
  config.host_cache_bytes = std::max<uint64_t>(2 * bytes, 64ull << 20);
  cairn::Result<uint64_t> cache = cairn::ParseSize(device_cache);
  if (!cache.ok()) {
    std::fprintf(stderr, "cairn-gpu-example: --device-cache: %s\n", cache.status().ToString().c_str());
    return 2;
  }
  config.device_cache_bytes = *cache;

  cairn::Result<std::unique_ptr<cairn::Client>> opened = cairn::Client::Open(config);
  if (!CairnOk(opened.status(), "Client::Open")) return 1;
  cairn::Client& client = **opened;
  if (!CairnOk(client.Protect(0, dev, bytes), "Protect")) return 1;

  for (uint32_t v = 0; v < versions; ++v) {
    if (!CudaOk(static_cast<cudaError_t>(LaunchFill(dev, n, v)), "fill kernel") ||
        !CudaOk(cudaDeviceSynchronize(), "cudaDeviceSynchronize") ||
        !CairnOk(client.Checkpoint(kName, v), "Checkpoint")) {
      return 1;
    }
    std::printf("checkpointed version %u (%llu MiB of device memory)\n", v,
                static_cast<unsigned long long>(mib));
  }
  const int64_t last = versions - 1;
  if (!CairnOk(client.Wait(kName, last, cairn::Level::kLocal), "Wait")) return 1;
  cairn::Result<int64_t> latest = client.Latest(kName);
  if (!CairnOk(latest.status(), "Latest")) return 1;
  if (*latest != last) {
    std::fprintf(stderr, "cairn-gpu-example: Latest returned %lld, expected %lld\n",
                 static_cast<long long>(*latest), static_cast<long long>(last));
    return 1;
  }

  bool ok = true;
  for (int64_t v : {last, last - 1}) {
    // Clobber the array so that a restore that does nothing cannot pass.
    if (!CudaOk(cudaMemset(dev, 0xA5, bytes), "cudaMemset") ||
        !CudaOk(cudaDeviceSynchronize(), "cudaDeviceSynchronize") ||
        !CairnOk(client.Restore(kName, v), "Restore")) {
      return 1;
    }
    ok = Check(dev, n, static_cast<uint32_t>(v)) && ok;
  }

  const cairn::Stats stats = client.GetStats();
  std::printf("device tier: gpu %s, device cache %llu MiB, captured %.2f GB/s, drained %llu MiB\n",
              stats.device.gpu ? "yes" : "no",
              static_cast<unsigned long long>(stats.device.capacity_bytes >> 20),
              stats.device.capture.gbps(),
              static_cast<unsigned long long>(stats.device.drain.bytes >> 20));
  if (!CairnOk(client.Close(), "Client::Close")) return 1;
  std::printf("%s\n", ok ? "OK" : "MISMATCH");
  return ok ? 0 : 1;
}
