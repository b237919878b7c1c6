#include "os/mem/prefault.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>

#include "os/mem/memory.hpp"

namespace cairn::os {

bool SampledPagesResident(const void* p, size_t n) {
  constexpr size_t kSamples = 64;
  const size_t page = PageSize();
  const uintptr_t first = reinterpret_cast<uintptr_t>(p) / page * page;
  const size_t pages = (reinterpret_cast<uintptr_t>(p) + n - first + page - 1) / page;
  const size_t stride = std::max<size_t>(1, pages / kSamples);
  for (size_t i = 0; i < pages; i += stride) {
    unsigned char resident = 0;
    if (::mincore(reinterpret_cast<void*>(first + i * page), page, &resident) != 0) return true;
    if ((resident & 1) == 0) return false;
  }
  return true;
}

Prefaulter::Prefaulter(std::vector<Range> ranges)
    : ranges_(std::move(ranges)), thread_([this](std::stop_token stop) { Run(stop); }) {}

Prefaulter::~Prefaulter() = default;  // the jthread asks Run to stop and joins

void Prefaulter::Run(std::stop_token stop) {
  for (const Range& r : ranges_) {
    auto* base = static_cast<uint8_t*>(r.data);
    for (size_t off = 0; off < r.bytes; off += kStep) {
      if (stop.stop_requested()) return;
      const size_t n = std::min(kStep, r.bytes - off);
      if (PopulatePages(base + off, n, /*write=*/true) != 0) return;
      done_.fetch_add(n, std::memory_order_release);
    }
  }
}

}  // namespace cairn::os
