// The mprotect + SIGSEGV page tracker (os/protect/page_tracker.hpp).
//
// Track makes the range PROT_READ; the first write to a page raises SIGSEGV,
// whose handler (process-wide, installed once: os/protect/segv_handler.hpp, shared
// with zero-copy's write protection) makes that page writable and records
// it. Faults outside every claimed range (and read faults) go to the handler
// the application had before ours. The handler may not take a mutex or
// allocate, so the pair "make writable + record" is made atomic against
// Collect's "take records + re-protect" by a per-range spin lock (held for
// two system calls at most; Collect never faults while holding it).
//
// Limits (docs/design.md): a system call that writes into a tracked page
// (read(2) into it) fails with EFAULT instead of faulting; a SIGSEGV handler
// installed by the application after ours bypasses it (Collect then notices,
// gives the range up and reports it whole).
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <vector>

#include "os/mem/memory.hpp"
#include "os/protect/page_tracker_impl.hpp"
#include "os/protect/segv_handler.hpp"
#include "util/mutex.hpp"

namespace cairn::os::internal {
namespace {

// What the handler touches of a tracked range (owned by its Range; the
// address stays fixed while the range is claimed).
struct Armed {
  uintptr_t start = 0;
  PageBits* bits = nullptr;
  std::atomic<uint64_t>* faults = nullptr;
  std::atomic<bool> busy{false};  // the spin lock
};

void SpinLock(Armed& a) {
  while (a.busy.exchange(true, std::memory_order_acquire)) ::sched_yield();
}
void SpinUnlock(Armed& a) { a.busy.store(false, std::memory_order_release); }

// In the signal handler (os/protect/segv_handler.hpp): make the page writable and
// record it, atomically against Collect's take-and-re-protect.
segv::Action OnWrite(void* ctx, uintptr_t page) {
  auto& a = *static_cast<Armed*>(ctx);
  SpinLock(a);
  const bool ok = ::mprotect(reinterpret_cast<void*>(page), PageSize(), PROT_READ | PROT_WRITE) == 0;
  if (ok) {
    a.bits->Set((page - a.start) / PageSize());
    a.faults->fetch_add(1, std::memory_order_relaxed);
  }
  SpinUnlock(a);
  return ok ? segv::Action::kRetry : segv::Action::kNotOurs;
}

// Pages of [start, start+bytes) that are not resident: Track populated them
// all, so such a page was dropped (MADV_DONTNEED: now zeros, no write seen)
// or swapped out (reported too: conservative).
void AppendNotResident(uintptr_t start, size_t bytes, ExtentList& out) {
  const size_t page = PageSize();
  std::vector<unsigned char> vec(bytes / page);
  if (::mincore(reinterpret_cast<void*>(start), bytes, vec.data()) != 0) return;
  for (size_t i = 0; i < vec.size(); ++i) {
    if ((vec[i] & 1) == 0) AppendExtent(out, i * page, page);
  }
}

struct Range {
  size_t bytes = 0;
  int slot = -1;
  bool first = true;
  std::string lost;
  std::unique_ptr<PageBits> bits;
  std::unique_ptr<Armed> armed;  // the handler's view (fixed address)
};

class MprotectTracker final : public PageTracker {
 public:
  MprotectTracker() : PageTracker(TrackMode::kMprotect) {}
  ~MprotectTracker() override {
    MutexLock l(&mu_);
    while (!ranges_map_.empty()) Release(ranges_map_.begin());
  }

  Status Track(void* addr, size_t bytes) override {
    CAIRN_RETURN_IF_ERROR(CheckTrackable(addr, bytes));
    const auto start = reinterpret_cast<uintptr_t>(addr);
    MutexLock l(&mu_);
    Range r;
    r.bytes = bytes;
    r.bits = std::make_unique<PageBits>(bytes / PageSize());
    r.armed = std::make_unique<Armed>();
    r.armed->start = start;
    r.armed->bits = r.bits.get();
    r.armed->faults = &faults_;
    // Populated first, so that Collect can tell a dropped page (not resident).
    TouchPages(addr, bytes);
    CAIRN_ASSIGN_OR_RETURN(r.slot, segv::Claim(start, bytes, &OnWrite, r.armed.get(), "page tracking"));
    if (::mprotect(addr, bytes, PROT_READ) != 0) {
      const int err = errno;
      segv::Unclaim(r.slot);
      return Status::Unsupported(std::string("page tracking: mprotect(PROT_READ) of the range: ") + std::strerror(err));
    }
    ranges_map_.emplace(start, std::move(r));
    ranges_.fetch_add(1, std::memory_order_relaxed);
    return Status::Ok();
  }

  Status Untrack(void* addr) override {
    MutexLock l(&mu_);
    auto it = ranges_map_.find(reinterpret_cast<uintptr_t>(addr));
    if (it == ranges_map_.end()) return Status::NotFound("page tracking: no tracked range starts at this address");
    Release(it);
    return Status::Ok();
  }

  Result<Collection> Collect(void* addr) override {
    const auto start = reinterpret_cast<uintptr_t>(addr);
    MutexLock l(&mu_);
    auto it = ranges_map_.find(start);
    if (it == ranges_map_.end()) return Status::NotFound("page tracking: no tracked range starts at this address");
    Range& r = it->second;
    Collection c;
    if (r.lost.empty() && !RangeMapped(start, r.bytes)) r.lost = "part of the range was unmapped (munmap) while tracked";
    if (r.lost.empty() && !segv::HandlerIsOurs()) {
      // Writes to our read-only pages would reach a handler that does not know
      // them: give the range up (writable again) before anything crashes.
      r.lost = "another SIGSEGV handler replaced Cairn's";
      (void)::mprotect(addr, r.bytes, PROT_READ | PROT_WRITE);
    }
    if (r.lost.empty()) {
      // Written pages are exactly the writable ones: take them and make them
      // read-only again, atomically against the handler.
      SpinLock(*r.armed);
      r.bits->Take(PageSize(), c.written);
      for (const Extent& e : c.written) {
        if (::mprotect(reinterpret_cast<void*>(start + e.offset), e.bytes, PROT_READ) != 0 && r.lost.empty()) {
          r.lost = std::string("mprotect(PROT_READ) to re-arm: ") + std::strerror(errno);
        }
      }
      SpinUnlock(*r.armed);
      ExtentList dropped;
      AppendNotResident(start, r.bytes, dropped);
      if (!dropped.empty()) {
        c.written.insert(c.written.end(), dropped.begin(), dropped.end());
        std::sort(c.written.begin(), c.written.end(),
                  [](const Extent& x, const Extent& y) { return x.offset < y.offset; });
        ExtentList merged;
        for (const Extent& e : c.written) AppendExtent(merged, e.offset, e.bytes);
        c.written.swap(merged);
      }
    }
    if (!r.lost.empty()) c.note = "page tracking lost: " + r.lost + "; the range is reported whole";
    if (r.first || !r.lost.empty()) {
      r.first = false;
      c.all = true;
      c.written.assign(1, Extent{0, r.bytes});
    }
    CountCollect(c, PageSize());
    return c;
  }

 private:
  // Makes the range writable, frees its slot, and waits until no handler can
  // still be reading the slot's bits before they are freed with the range.
  void Release(std::map<uintptr_t, Range>::iterator it) CAIRN_REQUIRES(mu_) {
    Range& r = it->second;
    if (RangeMapped(it->first, r.bytes)) (void)::mprotect(reinterpret_cast<void*>(it->first), r.bytes, PROT_READ | PROT_WRITE);
    segv::Unclaim(r.slot);
    ranges_map_.erase(it);
    ranges_.fetch_sub(1, std::memory_order_relaxed);
  }

  Mutex mu_;
  std::map<uintptr_t, Range> ranges_map_ CAIRN_GUARDED_BY(mu_);
};

}  // namespace

void UninstallSegvHandlerForTest() { segv::UninstallForTest(); }

Result<std::unique_ptr<PageTracker>> NewMprotectTracker() {
  CAIRN_RETURN_IF_ERROR(segv::Install());
  return std::unique_ptr<PageTracker>(std::make_unique<MprotectTracker>());
}

}  // namespace cairn::os::internal
