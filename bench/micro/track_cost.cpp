// cairn-track-cost: the cost of dirty-page tracking per first write, for each
// mechanism of os/protect/page_tracker.hpp, with 4 KiB pages and with transparent
// huge pages. A measurement tool, not a test (nothing here runs in CI).
//
//   cairn-track-cost [MiB (default 64)] [rounds (default 5)]
//
// Per mechanism and page kind: the region is populated, tracked and armed;
// then one byte per 4 KiB page is written (every page takes its first-write
// fault) and the loop is timed against the same loop on untracked populated
// memory. Printed: median us per first write (tracked minus untracked), the
// same for the first round alone, the untracked loop's ns per page, and
// the median time of the Collect that follows (scan + re-arm) per page.
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "os/mem/memory.hpp"
#include "os/protect/page_tracker.hpp"
#include "common/timing.hpp"

namespace {

using cairn::bench::Clock;
using cairn::bench::Median;
using cairn::bench::Since;

// AnonHugePages of /proc/self/smaps_rollup in KiB (THP actually in use).
long AnonHugeKiB() {
  FILE* f = std::fopen("/proc/self/smaps_rollup", "r");
  if (f == nullptr) return -1;
  char line[256];
  long kib = -1;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "AnonHugePages: %ld kB", &kib) == 1) break;
  }
  std::fclose(f);
  return kib;
}

double WriteEveryPage(uint8_t* p, size_t bytes, uint8_t value) {
  const size_t page = cairn::os::PageSize();
  const auto t = Clock::now();
  for (size_t o = 0; o < bytes; o += page) static_cast<volatile uint8_t*>(p)[o] = value;
  return Since(t);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace cairn::os;
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 64;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  const size_t bytes = mib << 20;
  const size_t pages = bytes / PageSize();
  std::printf("region %zu MiB (%zu pages of %zu bytes), %d rounds, medians\n", mib, pages, PageSize(), rounds);
  std::printf("%-11s %-5s %14s %14s %14s %16s\n", "mechanism", "thp", "us/first write", "round 1 us", "untracked ns",
              "collect us/page");
  for (bool thp : {false, true}) {
    for (TrackMode mode : {TrackMode::kUffdAsync, TrackMode::kUffdSync, TrackMode::kMprotect}) {
      auto tracker = PageTracker::CreateExactly(mode);
      if (!tracker.ok()) {
        std::printf("%-11s %-5s unavailable: %s\n", TrackModeName(mode), thp ? "yes" : "no",
                    tracker.status().ToString().c_str());
        continue;
      }
      auto m = Mapping::Create(bytes + (2 << 20), MapOptions{.populate = true, .huge_pages = thp});
      if (!m.ok()) return 1;
      auto* p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(m->data()) + (2 << 20) - 1) /
                                           (2 << 20) * (2 << 20));
      std::vector<double> base, tracked, collect;
      for (int r = 0; r < rounds; ++r) base.push_back(WriteEveryPage(p, bytes, static_cast<uint8_t>(r)));
      const long huge_before = AnonHugeKiB();
      if (!(*tracker)->Track(p, bytes).ok()) return 2;
      (void)(*tracker)->Collect(p);  // the first Collect reports all and arms
      for (int r = 0; r < rounds; ++r) {
        tracked.push_back(WriteEveryPage(p, bytes, static_cast<uint8_t>(r + 1)));
        const auto t = Clock::now();
        auto c = (*tracker)->Collect(p);
        collect.push_back(Since(t));
        if (!c.ok() || cairn::ExtentBytes(c->written) != bytes) {
          std::fprintf(stderr, "unexpected report\n");
          return 3;
        }
      }
      const long huge_after = AnonHugeKiB();
      (void)(*tracker)->Untrack(p);
      if (thp) std::printf("  (AnonHugePages: %ld KiB before tracking, %ld KiB after the rounds)\n", huge_before, huge_after);
      const double per = (Median(tracked) - Median(base)) / static_cast<double>(pages) * 1e6;
      // Round 1 separately: with THP it is the only round that meets whole
      // huge pages (the first tracked write splits them).
      const double first = (tracked[0] - Median(base)) / static_cast<double>(pages) * 1e6;
      std::printf("%-11s %-5s %14.2f %14.2f %14.1f %16.3f\n", TrackModeName(mode), thp ? "yes" : "no", per, first,
                  Median(base) / static_cast<double>(pages) * 1e9,
                  Median(collect) / static_cast<double>(pages) * 1e6);
    }
  }
  return 0;
}
