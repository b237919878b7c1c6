// cairn-numa-cache-cost: what host_cache.numa costs the capture (docs/design.md,
// "Placement"; docs/bench.md). A measurement tool, not a test.
//
//   cairn-numa-cache-cost [MiB (default 256)] [rounds (default 7)] [scratch dir]
//
// For host_cache.numa = off, auto and on, and with placement recording on
// and off: a client with a host cache of twice the region; each round
// checkpoints the region (a full copy), then waits until it is local, so the
// capture always finds free chunks. Printed: the median time of the
// Checkpoint call (the application's blocking time) and the stats' counts
// of blocks that went into a chunk on their source's node or another's. On a
// one-node machine `auto` is `off` (nothing is bound or sampled) and `on`
// binds every chunk to node 0 and looks each block's node up.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cairn/cairn.hpp"
#include "os/mem/numa.hpp"
#include "common/timing.hpp"

namespace {

using cairn::bench::Clock;
using cairn::bench::Median;
using cairn::bench::Since;

}  // namespace

int main(int argc, char** argv) {
  using namespace cairn;
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 256;
  const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 7;
  const std::string dir =
      argc > 3 ? argv[3] : std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/cairn-numa-cost";
  const size_t bytes = mib << 20;
  std::vector<char> region(bytes, 1);
  std::printf("%zu MiB, %d rounds, %d node(s)\n", mib, rounds, os::RealNuma().topology().nodes());
  std::printf("%-5s %-6s %14s %8s %8s\n", "numa", "record", "checkpoint_ms", "local", "remote");
  for (const char* numa : {"off", "auto", "on"}) {
    for (bool record : {true, false}) {
      Config c;
      c.scratch_dir = dir + "/" + numa + (record ? "-rec" : "-norec");
      c.host_cache_bytes = 2 * bytes;
      c.host_cache_numa = numa;
      c.record_placement = record;
      c.keep_versions = 1;
      auto client = Client::Open(c);
      if (!client.ok()) {
        std::fprintf(stderr, "open (%s): %s\n", numa, client.status().ToString().c_str());
        return 1;
      }
      Client& cl = **client;
      if (Status s = cl.Protect(1, region.data(), region.size()); !s.ok()) return 1;
      std::vector<double> t;
      for (int r = 0; r <= rounds; ++r) {  // round 0 warms the cache up
        region[static_cast<size_t>(r) * 4096 % bytes] = static_cast<char>(r);
        const auto t0 = Clock::now();
        if (Status s = cl.Checkpoint("numa", r); !s.ok()) {
          std::fprintf(stderr, "checkpoint: %s\n", s.ToString().c_str());
          return 1;
        }
        if (r > 0) t.push_back(Since(t0));
        if (Status s = cl.Wait("numa", r, Level::kLocal); !s.ok()) return 1;
      }
      const Stats st = cl.GetStats();
      std::printf("%-5s %-6s %14.2f %8llu %8llu\n", numa, record ? "on" : "off", Median(t) * 1e3,
                  static_cast<unsigned long long>(st.numa_local_chunks),
                  static_cast<unsigned long long>(st.numa_remote_chunks));
      (void)cl.Close();
    }
  }
  return 0;
}
