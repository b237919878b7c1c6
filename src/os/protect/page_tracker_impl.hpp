// Internals shared by the page tracker's mechanisms (os/protect/page_tracker.hpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "os/protect/page_tracker.hpp"

namespace cairn::os::internal {

// One bit per page, set by fault handlers (a signal handler included: Set is
// lock-free and async-signal-safe) and taken by Collect.
class PageBits {
 public:
  explicit PageBits(size_t pages) : pages_(pages), words_((pages + 63) / 64) {}
  void Set(size_t page) {
    words_[page / 64].fetch_or(uint64_t{1} << (page % 64), std::memory_order_release);
  }
  // Clears every bit and appends the runs of set ones to `out` as byte
  // extents (page_size bytes per bit). Each word is swapped atomically, so a
  // bit set concurrently is either taken now or kept for the next call.
  void Take(size_t page_size, ExtentList& out);
  size_t pages() const { return pages_; }

 private:
  size_t pages_;
  std::vector<std::atomic<uint64_t>> words_;
};

// Each returns kUnsupported with the reason when the mechanism cannot work
// in this process on this kernel.
Result<std::unique_ptr<PageTracker>> NewUffdTracker(bool async);
Result<std::unique_ptr<PageTracker>> NewMprotectTracker();
std::unique_ptr<PageTracker> NewNullTracker();

// Restores the SIGSEGV handler that was there before the mprotect tracker's
// (tests only; no mprotect tracker may be tracking anything).
void UninstallSegvHandlerForTest();

// msync(MS_ASYNC) fails with ENOMEM when part of the range is not mapped: a
// cheap (per-VMA, not per-page) check that a tracked range was not unmapped.
bool RangeMapped(uintptr_t start, size_t bytes);

}  // namespace cairn::os::internal
