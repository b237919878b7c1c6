// cairn-zero-copy-cost: what a zero-copy checkpoint costs the application per
// page, with 4 KiB pages and with transparent huge pages, for each write
// protection mechanism (docs/design.md, "Cost of a trapped first write").
// A measurement tool, not a test (nothing here runs in CI).
//
//   cairn-zero-copy-cost [MiB (default 64)] [rounds (default 5)]
//
// Per mechanism and page kind, each round: the checkpoint call's protection
// (ZeroCopy::Begin) is timed; then one byte per 4 KiB page is written, so
// every page takes a trapped first write that is copied into a COW slot
// (ORANGE: the buffer holds the region), and the loop is timed against the
// same loop on unprotected memory; then the pages are read and the epoch
// ended. With huge pages the region comes from cairn_alloc and its huge
// pages are put back (os::RestoreHugePages) before each round, as the
// pipeline does after an epoch. Copy mode's cost per page (a memcpy of the
// region at the call) is printed beside it: zero-copy's call is cheaper
// while fewer than copy / trap of the pages are first-written before the
// reader reaches them. Medians over the rounds.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cairn/cairn.hpp"
#include "capture/zero_copy/zero_copy.hpp"
#include "os/mem/mappings.hpp"
#include "os/mem/memory.hpp"
#include "os/mem/page_backing.hpp"
#include "common/timing.hpp"

namespace {

using cairn::bench::Clock;
using cairn::bench::Median;
using cairn::bench::Since;

double WriteEveryPage(uint8_t* p, size_t bytes, uint8_t value) {
  const size_t page = cairn::os::PageSize();
  const auto t = Clock::now();
  for (size_t o = 0; o < bytes; o += page) static_cast<volatile uint8_t*>(p)[o] = value;
  return Since(t);
}

struct Figures {
  double protect_s = 0, trap_s = 0, untracked_s = 0;
  bool huge_at_begin = false;
};

// One round: protect, trap every page, read everything back, end.
bool Round(cairn::core::ZeroCopy& zc, uint8_t* p, size_t bytes, bool thp, int r, Figures* f) {
  using namespace cairn;
  if (thp) (void)os::RestoreHugePages(p, bytes, [] { return false; });
  auto huge = os::BackedByHugePages(p, bytes);
  f->huge_at_begin = huge.ok() && *huge;
  f->untracked_s = WriteEveryPage(p, bytes, static_cast<uint8_t>(2 * r));
  auto t = Clock::now();
  if (!zc.Begin({core::ZeroCopyRange{p, bytes, {}}}).ok()) return false;
  f->protect_s = Since(t);
  f->trap_s = WriteEveryPage(p, bytes, static_cast<uint8_t>(2 * r + 1));
  std::vector<uint8_t> buf(1 << 20);
  for (size_t o = 0; o < bytes; o += buf.size()) {
    if (!zc.Read(p + o, buf.data(), std::min(buf.size(), bytes - o)).ok()) return false;
  }
  zc.End();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace cairn;
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 64;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  const size_t bytes = mib << 20;
  const size_t pages = bytes / os::PageSize();
  std::printf("region %zu MiB (%zu pages of %zu bytes), %d rounds, medians\n", mib, pages, os::PageSize(), rounds);
  std::printf("%-11s %-5s %12s %14s %14s %14s %10s\n", "mechanism", "thp", "protect ms", "us/trapped wr",
              "copy us/page", "crossover", "huge at call");
  for (bool thp : {false, true}) {
    for (WriteProtectMode mode : {WriteProtectMode::kUserfaultfd, WriteProtectMode::kMprotect}) {
      const char* name = mode == WriteProtectMode::kUserfaultfd ? "userfaultfd" : "mprotect";
      auto zc = core::ZeroCopy::Create(1.0, mode);
      if (!zc.ok()) {
        std::printf("%-11s %-5s unavailable: %s\n", name, thp ? "yes" : "no", zc.status().ToString().c_str());
        continue;
      }
      // thp: cairn_alloc (2 MiB-aligned, advised, remembered for the
      // restore); else a mapping of 4 KiB pages.
      auto alloc = thp ? Alloc(bytes) : Result<void*>(nullptr);
      auto map = thp ? Result<os::Mapping>(os::Mapping()) : os::Mapping::Create(bytes, os::MapOptions{});
      if (!alloc.ok() || !map.ok()) return 1;
      auto* p = thp ? static_cast<uint8_t*>(*alloc) : map->data();
      os::TouchPages(p, bytes);
      std::vector<double> protect, trap, copy;
      int huge_rounds = 0;
      std::vector<uint8_t> cache(bytes);
      for (int r = 0; r < rounds; ++r) {
        Figures f;
        if (!Round(**zc, p, bytes, thp, r, &f)) return 2;
        protect.push_back(f.protect_s);
        trap.push_back(f.trap_s - f.untracked_s);
        huge_rounds += f.huge_at_begin ? 1 : 0;
        const auto t = Clock::now();
        std::memcpy(cache.data(), p, bytes);  // copy mode's call
        copy.push_back(Since(t));
      }
      zc->reset();
      if (thp) (void)Free(p);
      const double per_trap = Median(trap) / static_cast<double>(pages) * 1e6;
      const double per_copy = Median(copy) / static_cast<double>(pages) * 1e6;
      std::printf("%-11s %-5s %12.2f %14.2f %14.3f %13.1f%% %7d/%d\n", name, thp ? "yes" : "no",
                  Median(protect) * 1e3, per_trap, per_copy, 100 * per_copy / per_trap, huge_rounds, rounds);
    }
  }
  return 0;
}
