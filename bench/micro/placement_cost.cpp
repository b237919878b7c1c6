// cairn-placement-cost: what recording placement costs (docs/design.md,
// "Placement"), against the checkpoint's blocking time (a memcpy of the
// region into the host cache), with 4 KiB pages and with transparent huge
// pages. A measurement tool, not a test.
//
//   cairn-placement-cost [MiB (default 1024)] [rounds (default 5)]
//
// Printed per page kind: the median time of RecordRegion at the 2 MiB granule
// that Cairn uses, the same at 4 KiB (every page queried, for comparison),
// a memcpy of the region (the capture's blocking copy), the recording's share
// of it, and a restore's bind + unbind of the whole region to node 0.
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/placement.hpp"
#include "os/mem/numa.hpp"
#include "common/timing.hpp"

namespace {

using cairn::bench::Clock;
using cairn::bench::Median;
using cairn::bench::Since;

template <typename F>
double Time(int rounds, F f) {
  std::vector<double> t;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = Clock::now();
    f();
    t.push_back(Since(t0));
  }
  return Median(t);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace cairn;
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1024;
  const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  const size_t bytes = mib << 20;
  os::Numa& numa = os::RealNuma();
  std::printf("%zu MiB, %d rounds, %d node(s)\n", mib, rounds, numa.topology().nodes());
  std::printf("%-6s %12s %12s %12s %9s %12s\n", "pages", "record_2M_ms", "record_4K_ms", "memcpy_ms",
              "share_%", "bind_ms");
  for (int advice : {MADV_NOHUGEPAGE, MADV_HUGEPAGE}) {
    void* src = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void* dst = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (src == MAP_FAILED || dst == MAP_FAILED) {
      std::fprintf(stderr, "mmap of %zu MiB failed\n", mib);
      return 1;
    }
    (void)::madvise(src, bytes, advice);
    std::memset(src, 1, bytes);
    std::memset(dst, 2, bytes);
    bool ok = true;
    const double rec2m = Time(rounds, [&] { ok &= core::RecordRegion(numa, 1, src, bytes, 2u << 20).ok(); });
    const double rec4k = Time(rounds, [&] { ok &= core::RecordRegion(numa, 1, src, bytes, 4096).ok(); });
    const double copy = Time(rounds, [&] { std::memcpy(dst, src, bytes); });
    const double bind = Time(rounds, [&] {
      ok &= numa.Bind(src, bytes, os::Binding{.node = 0}).ok();
      ok &= numa.Unbind(src, bytes).ok();
    });
    std::printf("%-6s %12.3f %12.3f %12.1f %9.3f %12.3f%s\n", advice == MADV_HUGEPAGE ? "2M" : "4K", rec2m * 1e3,
                rec4k * 1e3, copy * 1e3, 100 * rec2m / copy, bind * 1e3, ok ? "" : "  (a call failed)");
    ::munmap(src, bytes);
    ::munmap(dst, bytes);
  }
  return 0;
}
