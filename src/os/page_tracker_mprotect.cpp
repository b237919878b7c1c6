// The mprotect + SIGSEGV page tracker (os/page_tracker.hpp).
//
// Track makes the range PROT_READ; the first write to a page raises SIGSEGV,
// whose handler (process-wide, installed once) makes that page writable and
// records it. Faults outside every tracked range (and read faults) go to the
// handler the application had before ours. The handler may not take a mutex
// or allocate, so tracked ranges live in a fixed table of slots read with
// atomics, and the pair "make writable + record" is made atomic against
// Collect's "take records + re-protect" by a per-slot spin lock (held for two
// system calls at most; Collect never faults while holding it).
//
// Limits (docs/design.md): a system call that writes into a tracked page
// (read(2) into it) fails with EFAULT instead of faulting; a SIGSEGV handler
// installed by the application after ours bypasses it (Collect then notices,
// gives the range up and reports it whole).
#include <signal.h>
#include <sched.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <vector>

#include "os/memory.hpp"
#include "os/page_tracker_impl.hpp"
#include "util/mutex.hpp"

namespace cairn::os::internal {
namespace {

constexpr int kSlots = 256;

struct Slot {
  std::atomic<uintptr_t> start{0};  // 0 = free; published last (release)
  std::atomic<uintptr_t> end{0};
  std::atomic<PageBits*> bits{nullptr};
  std::atomic<std::atomic<uint64_t>*> faults{nullptr};
  std::atomic<bool> busy{false};  // the spin lock
};

Slot g_slots[kSlots];
std::atomic<int> g_in_handler{0};
struct sigaction g_previous;  // written once, before the handler is installed
Mutex g_install_mu;
bool g_installed CAIRN_GUARDED_BY(g_install_mu) = false;

void SpinLock(Slot& s) {
  while (s.busy.exchange(true, std::memory_order_acquire)) ::sched_yield();
}
void SpinUnlock(Slot& s) { s.busy.store(false, std::memory_order_release); }

bool IsWriteFault(void* uctx) {
#if defined(__x86_64__)
  // The page-fault error code: bit 1 = the access was a write.
  return (static_cast<ucontext_t*>(uctx)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
  (void)uctx;
  return true;  // a tracked page is PROT_READ: only a write faults on it
#endif
}

void Chain(int sig, siginfo_t* info, void* uctx) {
  const struct sigaction& p = g_previous;
  if ((p.sa_flags & SA_SIGINFO) != 0 && p.sa_sigaction != nullptr) {
    p.sa_sigaction(sig, info, uctx);
  } else if (p.sa_handler != SIG_DFL && p.sa_handler != SIG_IGN) {
    p.sa_handler(sig);
  } else {
    // Default action: restore it; returning re-executes the access, which
    // faults again and terminates the process as it would have without us.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(sig, &dfl, nullptr);
  }
}

void OnSegv(int sig, siginfo_t* info, void* uctx) {
  const int saved_errno = errno;
  g_in_handler.fetch_add(1, std::memory_order_acq_rel);
  const auto a = reinterpret_cast<uintptr_t>(info->si_addr);
  bool ours = false;
  if (info->si_code == SEGV_ACCERR && IsWriteFault(uctx)) {
    for (Slot& s : g_slots) {
      const uintptr_t start = s.start.load(std::memory_order_acquire);
      if (start == 0 || a < start || a >= s.end.load(std::memory_order_relaxed)) continue;
      const size_t page = PageSize();
      const uintptr_t p = a / page * page;
      SpinLock(s);
      ours = ::mprotect(reinterpret_cast<void*>(p), page, PROT_READ | PROT_WRITE) == 0;
      if (ours) {
        s.bits.load(std::memory_order_relaxed)->Set((p - start) / page);
        s.faults.load(std::memory_order_relaxed)->fetch_add(1, std::memory_order_relaxed);
      }
      SpinUnlock(s);
      break;
    }
  }
  g_in_handler.fetch_sub(1, std::memory_order_acq_rel);
  errno = saved_errno;
  if (!ours) Chain(sig, info, uctx);
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

bool HandlerIsOurs() {
  struct sigaction cur {};
  return ::sigaction(SIGSEGV, nullptr, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) != 0 &&
         cur.sa_sigaction == OnSegv;
}

Status InstallHandler() {
  MutexLock l(&g_install_mu);
  if (g_installed) return Status::Ok();
  struct sigaction sa {};
  sa.sa_sigaction = OnSegv;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (::sigaction(SIGSEGV, &sa, &g_previous) != 0) {
    return Status::Unsupported(std::string("sigaction(SIGSEGV): ") + std::strerror(errno));
  }
  g_installed = true;
  return Status::Ok();
}

struct Range {
  size_t bytes = 0;
  int slot = -1;
  bool first = true;
  std::string lost;
  std::unique_ptr<PageBits> bits;
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
    MutexLock g(&g_install_mu);  // serializes slot allocation across trackers
    int free_slot = -1;
    for (int i = 0; i < kSlots; ++i) {
      const uintptr_t s = g_slots[i].start.load(std::memory_order_acquire);
      if (s == 0) {
        if (free_slot < 0) free_slot = i;
      } else if (s < start + bytes && start < g_slots[i].end.load(std::memory_order_relaxed)) {
        return Status::Unsupported("page tracking: the range overlaps one already tracked (by this or "
                                   "another tracker)");
      }
    }
    if (free_slot < 0) return Status::Unsupported("page tracking: more than 256 ranges tracked with mprotect");
    Range r;
    r.bytes = bytes;
    r.slot = free_slot;
    r.bits = std::make_unique<PageBits>(bytes / PageSize());
    // Populated first, so that Collect can tell a dropped page (not resident).
    TouchPages(addr, bytes);
    Slot& s = g_slots[free_slot];
    s.bits.store(r.bits.get(), std::memory_order_relaxed);
    s.faults.store(&faults_, std::memory_order_relaxed);
    s.end.store(start + bytes, std::memory_order_relaxed);
    s.start.store(start, std::memory_order_release);
    if (::mprotect(addr, bytes, PROT_READ) != 0) {
      const int err = errno;
      s.start.store(0, std::memory_order_release);
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
    if (r.lost.empty() && !HandlerIsOurs()) {
      // Writes to our read-only pages would reach a handler that does not know
      // them: give the range up (writable again) before anything crashes.
      r.lost = "another SIGSEGV handler replaced Cairn's";
      (void)::mprotect(addr, r.bytes, PROT_READ | PROT_WRITE);
    }
    if (r.lost.empty()) {
      // Written pages are exactly the writable ones: take them and make them
      // read-only again, atomically against the handler.
      Slot& s = g_slots[r.slot];
      SpinLock(s);
      r.bits->Take(PageSize(), c.written);
      for (const Extent& e : c.written) {
        if (::mprotect(reinterpret_cast<void*>(start + e.offset), e.bytes, PROT_READ) != 0 && r.lost.empty()) {
          r.lost = std::string("mprotect(PROT_READ) to re-arm: ") + std::strerror(errno);
        }
      }
      SpinUnlock(s);
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
    g_slots[r.slot].start.store(0, std::memory_order_release);
    while (g_in_handler.load(std::memory_order_acquire) != 0) ::sched_yield();
    ranges_map_.erase(it);
    ranges_.fetch_sub(1, std::memory_order_relaxed);
  }

  Mutex mu_;
  std::map<uintptr_t, Range> ranges_map_ CAIRN_GUARDED_BY(mu_);
};

}  // namespace

void UninstallSegvHandlerForTest() {
  MutexLock l(&g_install_mu);
  if (!g_installed) return;
  ::sigaction(SIGSEGV, &g_previous, nullptr);
  g_installed = false;
}

Result<std::unique_ptr<PageTracker>> NewMprotectTracker() {
  CAIRN_RETURN_IF_ERROR(InstallHandler());
  return std::unique_ptr<PageTracker>(std::make_unique<MprotectTracker>());
}

}  // namespace cairn::os::internal
