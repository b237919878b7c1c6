// The page tracker's factory and the pieces its mechanisms share
// (os/protect/page_tracker.hpp). The mechanisms live in page_tracker_uffd.cpp and
// page_tracker_mprotect.cpp.
#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <map>
#include <utility>

#include "os/mem/memory.hpp"
#include "os/protect/page_tracker.hpp"
#include "os/protect/page_tracker_impl.hpp"
#include "util/mutex.hpp"

namespace cairn::os {

const char* TrackModeName(TrackMode mode) {
  switch (mode) {
    case TrackMode::kUffdAsync: return "uffd-async";
    case TrackMode::kUffdSync: return "uffd-sync";
    case TrackMode::kMprotect: return "mprotect";
    case TrackMode::kNone: return "none";
  }
  return "?";
}

Result<TrackMode> ParseTrackMode(std::string_view name) {
  for (TrackMode m : {TrackMode::kUffdAsync, TrackMode::kUffdSync, TrackMode::kMprotect, TrackMode::kNone}) {
    if (name == TrackModeName(m)) return m;
  }
  return Status::InvalidArgument("unknown page tracking mechanism \"" + std::string(name) +
                                 "\": expected uffd-async, uffd-sync, mprotect or none");
}

Status CheckTrackable(const void* addr, size_t bytes) {
  const size_t page = PageSize();
  const auto a = reinterpret_cast<uintptr_t>(addr);
  if (addr == nullptr || bytes == 0 || a % page != 0 || bytes % page != 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "address %p (size %zu) is not %s", addr, bytes,
                  addr == nullptr ? "a valid address"
                  : bytes == 0    ? "a non-empty range"
                                  : "aligned to the page size");
    return Status::InvalidArgument(std::string("page tracking needs a page-aligned range: ") + buf +
                                   " (" + std::to_string(page) +
                                   " bytes; allocate tracked memory with cairn_alloc)");
  }
  return Status::Ok();
}

PageTrackerStats PageTracker::stats() const {
  PageTrackerStats s;
  s.mode = mode_;
  s.fallbacks = fallbacks_;
  s.ranges = ranges_.load(std::memory_order_relaxed);
  s.faults = faults_.load(std::memory_order_relaxed);
  s.pages_reported = pages_reported_.load(std::memory_order_relaxed);
  s.collects = collects_.load(std::memory_order_relaxed);
  s.lost = lost_.load(std::memory_order_relaxed);
  return s;
}

void PageTracker::CountCollect(const Collection& c, size_t page) {
  collects_.fetch_add(1, std::memory_order_relaxed);
  pages_reported_.fetch_add(ExtentBytes(c.written) / page, std::memory_order_relaxed);
  if (c.all && !c.note.empty()) lost_.fetch_add(1, std::memory_order_relaxed);
}

std::unique_ptr<PageTracker> PageTracker::Create(TrackMode from) {
  std::string fallbacks;
  for (int m = static_cast<int>(from); m <= static_cast<int>(TrackMode::kNone); ++m) {
    auto t = CreateExactly(static_cast<TrackMode>(m));
    if (t.ok()) {
      std::unique_ptr<PageTracker> tracker = std::move(t).value();
      tracker->set_fallbacks(std::move(fallbacks));
      return tracker;
    }
    fallbacks += std::string(TrackModeName(static_cast<TrackMode>(m))) + ": " + t.status().message() + "\n";
  }
  return internal::NewNullTracker();  // not reached: kNone always works
}

Result<std::unique_ptr<PageTracker>> PageTracker::CreateExactly(TrackMode mode) {
  switch (mode) {
    case TrackMode::kUffdAsync: return internal::NewUffdTracker(/*async=*/true);
    case TrackMode::kUffdSync: return internal::NewUffdTracker(/*async=*/false);
    case TrackMode::kMprotect: return internal::NewMprotectTracker();
    case TrackMode::kNone: return internal::NewNullTracker();
  }
  return Status::InvalidArgument("unknown page tracking mode");
}

namespace internal {

void PageBits::Take(size_t page_size, ExtentList& out) {
  for (size_t w = 0; w < words_.size(); ++w) {
    uint64_t bits = words_[w].exchange(0, std::memory_order_acq_rel);
    while (bits != 0) {
      const int b = __builtin_ctzll(bits);
      bits &= bits - 1;
      AppendExtent(out, (w * 64 + static_cast<size_t>(b)) * page_size, page_size);
    }
  }
}

bool RangeMapped(uintptr_t start, size_t bytes) {
  return ::msync(reinterpret_cast<void*>(start), bytes, MS_ASYNC) == 0 || errno != ENOMEM;
}

namespace {

// kNone: no mechanism; every Collect reports the whole range.
class NullTracker final : public PageTracker {
 public:
  NullTracker() : PageTracker(TrackMode::kNone) {}

  Status Track(void* addr, size_t bytes) override {
    CAIRN_RETURN_IF_ERROR(CheckTrackable(addr, bytes));
    MutexLock l(&mu_);
    if (!ranges_map_.emplace(reinterpret_cast<uintptr_t>(addr), bytes).second) {
      return Status::InvalidArgument("page tracking: the range at this address is already tracked");
    }
    ranges_.fetch_add(1, std::memory_order_relaxed);
    return Status::Ok();
  }
  Status Untrack(void* addr) override {
    MutexLock l(&mu_);
    if (ranges_map_.erase(reinterpret_cast<uintptr_t>(addr)) == 0) {
      return Status::NotFound("page tracking: no tracked range starts at this address");
    }
    ranges_.fetch_sub(1, std::memory_order_relaxed);
    return Status::Ok();
  }
  Result<Collection> Collect(void* addr) override {
    size_t bytes = 0;
    {
      MutexLock l(&mu_);
      auto it = ranges_map_.find(reinterpret_cast<uintptr_t>(addr));
      if (it == ranges_map_.end()) return Status::NotFound("page tracking: no tracked range starts at this address");
      bytes = it->second;
    }
    Collection c;
    c.all = true;
    c.written.push_back(Extent{0, bytes});
    CountCollect(c, PageSize());
    return c;
  }

 private:
  Mutex mu_;
  std::map<uintptr_t, size_t> ranges_map_ CAIRN_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<PageTracker> NewNullTracker() { return std::make_unique<NullTracker>(); }

}  // namespace internal
}  // namespace cairn::os
