// Faulting a destination in ahead of the code that fills it.
//
// Why: a restore into fresh memory (a new process's malloc) takes one page
// fault per 4 KiB page, each zeroing the page, on the thread that copies the
// data in; on the development VM that is 0.16-0.32 s of CPU per GiB (more
// while the host hands the memory back), the difference between a restore
// at the disk's speed and one 1.3-1.5x slower. A helper thread that faults
// the pages in just ahead of the copies moves that work off the readers and
// overlaps it with the I/O.
#pragma once

#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace cairn::os {

struct Range {
  void* data = nullptr;
  size_t bytes = 0;
};

// Whether [p, p+n) looks faulted in: mincore() over up to 64 evenly spaced
// pages, all resident. A "yes" may be wrong for pages between the samples;
// the question is only whether prefaulting is worth a thread. Precondition:
// n > 0. An unanswerable question (mincore failed) answers yes.
bool SampledPagesResident(const void* p, size_t n);

// Faults `ranges` in, writable, in order, in steps of kStep, on one owned
// helper thread (MADV_POPULATE_WRITE: contents are preserved, so it may run
// while other threads write the same pages). Stops at the first range the
// kernel refuses (no MADV_POPULATE_WRITE, a mapping it cannot populate): the
// writers then fault the pages themselves, as without a Prefaulter. The
// destructor stops the helper at its next step and joins it. Preconditions:
// the ranges stay mapped until the destructor returns.
class Prefaulter {
 public:
  static constexpr size_t kStep = 4u << 20;

  explicit Prefaulter(std::vector<Range> ranges);
  ~Prefaulter();
  Prefaulter(const Prefaulter&) = delete;
  Prefaulter& operator=(const Prefaulter&) = delete;

  // Waits until the helper has been through every range (or stopped at one
  // the kernel refused). The destructor does not wait for that.
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  // Bytes faulted in so far (for tests and traces).
  size_t done() const { return done_.load(std::memory_order_acquire); }

 private:
  void Run(std::stop_token stop);

  const std::vector<Range> ranges_;
  std::atomic<size_t> done_{0};
  std::jthread thread_;  // last: started after the fields it reads
};

}  // namespace cairn::os
