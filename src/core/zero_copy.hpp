// Zero-copy capture epochs (checkpoint.capture = zero-copy; docs/design.md,
// "Zero-copy captures"): the memory of a version is write-protected at the
// checkpoint call and read later, off the application thread, as it was at
// that call. A first write by the application to a page not read yet is
// trapped: the page is copied into a preallocated copy-on-write slot and
// released (ORANGE), or, with no slot free, the writer waits until the page
// is read (RED). Pages read before any write are GREEN.
//
// One epoch at a time: Begin (protects), Read (any number, one reader
// thread), End (removes what protection is left). The fault handler runs on
// os::WriteProtect's owned thread and touches only preallocated state.
//
// Thread safety: Begin, Read, End and the destructor from one thread at a time
// (the capture's), counters() from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cairn/config.hpp"
#include "cairn/status.hpp"
#include "os/memory.hpp"
#include "util/extent.hpp"

namespace cairn::os {
class WriteProtect;
enum class WpMechanism : uint8_t;
}

namespace cairn::core {

// One region of an epoch: page-aligned host memory, and the extents of it
// that the version stores (empty: all of it). Only those are protected.
struct ZeroCopyRange {
  uint8_t* data = nullptr;
  size_t bytes = 0;
  ExtentList extents;
};

// Totals over the engine's epochs (stats: zero_copy_*).
struct ZeroCopyCounters {
  uint64_t epochs = 0;
  uint64_t protected_bytes = 0;  // summed over epochs
  uint64_t cow_bytes = 0;        // the last epoch's COW buffer
  uint64_t cow_peak_bytes = 0;   // most COW bytes in use at once
  uint64_t red = 0;              // first writes that waited for the page's read
  uint64_t orange = 0;           // first writes copied into the COW buffer
  uint64_t green = 0;            // pages read before any write
  uint64_t blue = 0;             // first writes after the epoch's end (not monitored yet: 0)
  uint64_t faults = 0;           // write faults handled
  double red_wait_s = 0;         // application time blocked in RED faults
  double fault_s = 0;            // handler time spent on faults
};

class ZeroCopy {
 public:
  // The COW buffer of an epoch: cow_fraction of its protected bytes, at
  // least kMinCowPages pages (none when cow_fraction is 0), at most kMaxCowBytes.
  static constexpr size_t kMinCowPages = 16;
  static constexpr uint64_t kMaxCowBytes = uint64_t{1} << 30;
  static uint64_t CowBytes(double cow_fraction, uint64_t protected_bytes);

  // Write protection by `mode` (kAuto: userfaultfd, else mprotect, and
  // wp_note() says why userfaultfd was skipped). kUnsupported with the
  // reasons when no allowed mechanism works here (the caller copies instead).
  static Result<std::unique_ptr<ZeroCopy>> Create(double cow_fraction,
                                                  WriteProtectMode mode = WriteProtectMode::kAuto);
  ~ZeroCopy();  // ends an epoch in progress: no protection is left behind
  ZeroCopy(const ZeroCopy&) = delete;
  ZeroCopy& operator=(const ZeroCopy&) = delete;

  // Starts an epoch: allocates the COW slots, registers and protects the
  // ranges' extents. kState when an epoch is in progress; kUnsupported when a
  // range cannot be protected (nothing is left protected then).
  Status Begin(const std::vector<ZeroCopyRange>& ranges);
  bool in_epoch() const { return epoch_ != nullptr; }
  // Copies [src, src + n) as it was at Begin into dst. src lies in one
  // protected extent; pieces come in increasing order within a page, and a
  // page is done (its protection removed, its slot freed) by the piece that
  // reaches its end. kInvalidArgument when src is not protected memory of
  // the epoch or was already read.
  Status Read(const void* src, void* dst, size_t n);
  // Ends the epoch: every protection is removed (blocked writers go on), the
  // COW buffer is freed.
  void End();

  ZeroCopyCounters counters() const;
  // The mechanism in use, and why kAuto did not get userfaultfd ("" if it did).
  os::WpMechanism mechanism() const;
  const std::string& wp_note() const { return wp_note_; }

  // Tests: called by the handler before it decides on a fault (the test may
  // block in it to force an interleaving). Set before Begin.
  void set_fault_hook_for_test(void (*hook)(void*), void* arg) {
    hook_arg_.store(arg, std::memory_order_relaxed);
    hook_.store(hook, std::memory_order_release);
  }

 private:
  struct Epoch;
  explicit ZeroCopy(double cow_fraction);
  bool OnFault(uintptr_t page);  // the handler thread
  void AddWait(int64_t ns);

  const double cow_fraction_;
  std::unique_ptr<os::WriteProtect> wp_;
  std::string wp_note_;
  std::unique_ptr<Epoch> epoch_;          // the capture thread's
  std::atomic<Epoch*> live_{nullptr};     // the handler's view of epoch_
  std::atomic<int> in_handler_{0};
  std::atomic<void (*)(void*)> hook_{nullptr};  // atomic: set while the handler runs
  std::atomic<void*> hook_arg_{nullptr};

  std::atomic<uint64_t> epochs_{0}, protected_bytes_{0}, cow_bytes_{0}, cow_peak_{0};
  std::atomic<uint64_t> red_{0}, orange_{0}, green_{0}, faults_{0};
  std::atomic<int64_t> red_wait_ns_{0}, fault_ns_{0};
};

}  // namespace cairn::core
