// Dirty-page tracking of host memory (checkpoint.changes = pages): which pages
// of a tracked range were written since the previous Collect.
//
// Four mechanisms, best first; PageTracker::Create picks the first that works
// on the running kernel and says why it skipped the others:
//   uffd-async  userfaultfd write-protection with UFFD_FEATURE_WP_ASYNC: the
//               kernel resolves a first write itself (~1 us), and Collect asks
//               PAGEMAP_SCAN which pages were written, re-protecting them in
//               the same call (PM_SCAN_WP_MATCHING). Linux 6.7+.
//   uffd-sync   userfaultfd write-protection with an owned handler thread that
//               records the page and removes its protection (~10 us).
//   mprotect    PROT_READ + a process-wide SIGSEGV handler that records the
//               page and makes it writable; faults outside tracked ranges are
//               passed on to the application's previous handler.
//   none        nothing is tracked: every Collect reports the whole range
//               (the caller hashes or copies it all).
//
// Guarantee (every mechanism): a write that completes before Collect starts
// is reported by that Collect; a write that completes after Collect returns
// is reported by the next one. The caller therefore copies the reported pages
// *after* Collect, and a write racing that copy shows up again next time.
// Reports may be conservative (a page reported that was not written) but never
// miss one. When tracking of a range cannot be trusted any more (munmap,
// mremap, MADV_DONTNEED seen by a mechanism that cannot see it page by page,
// a lost registration), Collect reports the whole range with `all` set and a
// note, and re-arms what it can.
//
// Ranges must be page-aligned (start and size): cairn_alloc returns such
// memory. Thread safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "cairn/status.hpp"
#include "util/extent.hpp"

namespace cairn::os {

// Best first; the factory walks down this list.
enum class TrackMode : uint8_t { kUffdAsync = 0, kUffdSync = 1, kMprotect = 2, kNone = 3 };

// "uffd-async", "uffd-sync", "mprotect", "none".
const char* TrackModeName(TrackMode mode);
// The inverse of TrackModeName; kInvalidArgument listing the names otherwise.
Result<TrackMode> ParseTrackMode(std::string_view name);

// What Collect found for one range.
struct Collection {
  // Pages written since the previous Collect (or since Track), as byte
  // offsets from the tracked address; canonical, page multiples.
  ExtentList written;
  // The whole range is reported (written = [0, size)): the first Collect after
  // Track, or tracking can no longer be trusted (`note` says why).
  bool all = false;
  std::string note;  // "" unless tracking was lost
};

struct PageTrackerStats {
  TrackMode mode = TrackMode::kNone;
  // Why the better mechanisms were skipped, one "name: reason" per line; ""
  // when the first choice worked or the mode was forced.
  std::string fallbacks;
  uint64_t ranges = 0;          // tracked now
  uint64_t faults = 0;          // first-write faults handled (sync, mprotect)
  uint64_t pages_reported = 0;  // pages reported written by Collect (all: every page)
  uint64_t collects = 0;
  uint64_t lost = 0;            // Collects that reported `all` because tracking was lost
};

class PageTracker {
 public:
  virtual ~PageTracker() = default;
  PageTracker(const PageTracker&) = delete;
  PageTracker& operator=(const PageTracker&) = delete;

  // The best working mechanism, starting at `from` (kUffdAsync: the best).
  // Never fails: kNone is always there. A mechanism "works" when its setup
  // succeeds here and now (userfaultfd opened and negotiated, PAGEMAP_SCAN
  // answered, signal handler installed).
  static std::unique_ptr<PageTracker> Create(TrackMode from = TrackMode::kUffdAsync);
  // Exactly `mode`, or kUnsupported saying why not (tests, benchmarks).
  static Result<std::unique_ptr<PageTracker>> CreateExactly(TrackMode mode);

  TrackMode mode() const { return mode_; }

  // Starts tracking [addr, addr + bytes): page-aligned, bytes > 0, not
  // overlapping a range this tracker already tracks. kInvalidArgument names
  // the address/size otherwise. kUnsupported when this mechanism cannot track
  // that memory (e.g. another userfaultfd already registered it, or it is not
  // anonymous private memory): the caller falls back to hashing it.
  virtual Status Track(void* addr, size_t bytes) = 0;
  // Stops tracking the range that starts at addr and removes the protection
  // (unless the memory is already unmapped). kNotFound if none.
  virtual Status Untrack(void* addr) = 0;
  // Pages of the range starting at addr written since the previous Collect,
  // re-armed atomically with the report (see the guarantee above).
  virtual Result<Collection> Collect(void* addr) = 0;

  PageTrackerStats stats() const;

 protected:
  explicit PageTracker(TrackMode mode) : mode_(mode) {}
  void set_fallbacks(std::string f) { fallbacks_ = std::move(f); }
  // Bookkeeping shared by the mechanisms (atomic: updated off the mutex).
  void CountCollect(const Collection& c, size_t page);
  std::atomic<uint64_t> ranges_{0};
  std::atomic<uint64_t> faults_{0};

 private:
  const TrackMode mode_;
  std::string fallbacks_;  // set once, before the tracker is shared
  std::atomic<uint64_t> pages_reported_{0};
  std::atomic<uint64_t> collects_{0};
  std::atomic<uint64_t> lost_{0};
};

// Checks the Track preconditions: "page tracking needs a page-aligned range:
// address 0x... (size N) is not aligned to 4096 bytes (use cairn_alloc)".
Status CheckTrackable(const void* addr, size_t bytes);

}  // namespace cairn::os
