// userfaultfd write-protection trackers (os/protect/page_tracker.hpp): uffd-async
// (UFFD_FEATURE_WP_ASYNC + PAGEMAP_SCAN) and uffd-sync (a handler thread).
//
// Both register each range with UFFDIO_REGISTER_MODE_WP and write-protect it
// whole (with UFFD_FEATURE_WP_UNPOPULATED never-touched pages get a marker,
// so their first write is seen too). They differ in who resolves a write:
//  - async: the kernel removes the protection itself and the page table keeps
//    the fact ("written" = not write-protected). Collect asks PAGEMAP_SCAN for
//    the written pages and re-protects exactly those in the same walk.
//  - sync: the faulting thread sleeps until our handler thread records the
//    page and removes its protection (UFFDIO_WRITEPROTECT, which wakes it).
//    Collect re-protects the recorded pages under the mutex the handler takes
//    to record, so a page is writable only while it is in the record.
// A userfaultfd belongs to the process that opened it: after fork() the child
// has neither the registration nor (sync) the handler thread, and our ioctls
// would act on the parent's memory. Every entry point checks the pid.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "os/mem/memory.hpp"
#include "os/protect/page_tracker_impl.hpp"
#include "os/protect/uffd.hpp"
#include "os/protect/uffd_uapi.hpp"
#include "util/mutex.hpp"

namespace cairn::os::internal {
namespace {

using uffd::Errno;

struct Range {
  size_t bytes = 0;
  bool first = true;                // the next Collect reports everything
  std::string lost;                 // why tracking cannot be trusted ("" = it can)
  std::unique_ptr<PageBits> bits;   // sync: pages written since the last Collect
};

class UffdTracker final : public PageTracker {
 public:
  UffdTracker(bool async, int uffd, int pagemap, uint64_t features)
      : PageTracker(async ? TrackMode::kUffdAsync : TrackMode::kUffdSync),
        async_(async), uffd_(uffd), pagemap_(pagemap), features_(features), pid_(::getpid()) {}

  ~UffdTracker() override;
  Status StartHandler();

  Status Track(void* addr, size_t bytes) override;
  Status Untrack(void* addr) override;
  Result<Collection> Collect(void* addr) override;

 private:
  bool InChild() const { return ::getpid() != pid_; }
  // UFFDIO_WRITEPROTECT of [start, start+len): protect or release (+ wake).
  int Protect(uintptr_t start, size_t len, bool wp) const;
  // async: appends the pages of [start, start+bytes) that PAGEMAP_SCAN
  // matches (inverted/mask as the ioctl's) and write-protects them.
  Status Scan(uintptr_t start, size_t bytes, uint64_t inverted, uint64_t mask, ExtentList& out) const;
  Status CollectAsync(uintptr_t start, size_t bytes, ExtentList& out) const;
  Status CollectSync(uintptr_t start, Range& r, ExtentList& out) CAIRN_REQUIRES(mu_);
  void HandlerLoop(std::stop_token st);
  void HandleFault(uintptr_t addr, std::vector<uintptr_t>& retry);
  void MarkLost(uintptr_t start, uintptr_t end, const std::string& why);

  const bool async_;
  const int uffd_;
  const int pagemap_;  // async: /proc/self/pagemap
  const uint64_t features_;
  const pid_t pid_;
  int stop_fd_ = -1;   // sync: eventfd that stops the handler
  // sync: batches of messages the handler began to read / finished handling.
  // munmap/madvise return once their event is *read*; Collect waits for the
  // batch in progress so that an event read before it is also handled.
  std::atomic<uint64_t> batches_started_{0};
  std::atomic<uint64_t> batches_done_{0};
  Mutex mu_;
  std::map<uintptr_t, Range> ranges_map_ CAIRN_GUARDED_BY(mu_);
  std::jthread handler_;
};

UffdTracker::~UffdTracker() {
  if (InChild()) {
    // The handler thread exists only in the parent: joining its copy would
    // wait forever. Leak the handle (a child that forked is exiting or exec'ing).
    if (handler_.joinable()) new std::jthread(std::move(handler_));
  } else {
    if (stop_fd_ >= 0) {
      const uint64_t one = 1;
      (void)!::write(stop_fd_, &one, sizeof one);
    }
    if (handler_.joinable()) handler_.join();
    MutexLock l(&mu_);
    for (auto& [start, r] : ranges_map_) {
      uffdio_range range{start, r.bytes};
      (void)::ioctl(uffd_, UFFDIO_UNREGISTER, &range);  // clears the protection
    }
  }
  if (stop_fd_ >= 0) ::close(stop_fd_);
  if (pagemap_ >= 0) ::close(pagemap_);
  ::close(uffd_);
}

Status UffdTracker::StartHandler() {
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) return Status::Unsupported(Errno("eventfd", errno));
  handler_ = std::jthread([this](std::stop_token st) { HandlerLoop(st); });
  return Status::Ok();
}

int UffdTracker::Protect(uintptr_t start, size_t len, bool wp) const { return uffd::Protect(uffd_, start, len, wp); }

Status UffdTracker::Track(void* addr, size_t bytes) {
  CAIRN_RETURN_IF_ERROR(CheckTrackable(addr, bytes));
  if (InChild()) return Status::Unsupported("page tracking: this tracker belongs to the parent process (fork)");
  const auto start = reinterpret_cast<uintptr_t>(addr);
  MutexLock l(&mu_);
  auto next = ranges_map_.lower_bound(start);
  if ((next != ranges_map_.end() && next->first < start + bytes) ||
      (next != ranges_map_.begin() && std::prev(next)->first + std::prev(next)->second.bytes > start)) {
    return Status::InvalidArgument("page tracking: the range overlaps one this tracker already tracks");
  }
  CAIRN_RETURN_IF_ERROR(uffd::RegisterWp(uffd_, features_, addr, bytes, "page tracking",
                                         "another tracker or library tracks it"));
  if (int err = Protect(start, bytes, true); err != 0) {
    uffdio_range range{start, bytes};
    (void)::ioctl(uffd_, UFFDIO_UNREGISTER, &range);
    return Status::Unsupported(Errno("page tracking: UFFDIO_WRITEPROTECT of the range", err));
  }
  Range r;
  r.bytes = bytes;
  if (!async_) r.bits = std::make_unique<PageBits>(bytes / PageSize());
  ranges_map_.emplace(start, std::move(r));
  ranges_.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

Status UffdTracker::Untrack(void* addr) {
  const auto start = reinterpret_cast<uintptr_t>(addr);
  MutexLock l(&mu_);
  auto it = ranges_map_.find(start);
  if (it == ranges_map_.end()) return Status::NotFound("page tracking: no tracked range starts at this address");
  if (!InChild() && RangeMapped(start, it->second.bytes)) {
    uffdio_range range{start, it->second.bytes};
    (void)::ioctl(uffd_, UFFDIO_UNREGISTER, &range);  // removes the protection, wakes waiters
  }
  ranges_map_.erase(it);
  ranges_.fetch_sub(1, std::memory_order_relaxed);
  return Status::Ok();
}

Status UffdTracker::Scan(uintptr_t start, size_t bytes, uint64_t inverted, uint64_t mask,
                         ExtentList& out) const {
  page_region vec[256];
  pm_scan_arg arg{};
  arg.size = sizeof arg;
  arg.flags = PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC;
  arg.end = start + bytes;
  arg.vec = reinterpret_cast<uintptr_t>(vec);
  arg.vec_len = sizeof vec / sizeof vec[0];
  arg.category_inverted = inverted;
  arg.category_mask = mask;
  arg.return_mask = PAGE_IS_WRITTEN | PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
  for (uint64_t from = start; from < start + bytes;) {
    arg.start = from;
    arg.walk_end = 0;
    const int n = ::ioctl(pagemap_, PAGEMAP_SCAN, &arg);
    if (n < 0) {
      const int err = errno;
      if (err == EINTR || err == EAGAIN) continue;
      return Status::Io(err == EPERM ? std::string("part of the range is no longer registered for write "
                                                   "tracking (remapped, or mapped anew)")
                                     : Errno("PAGEMAP_SCAN", err));
    }
    for (int i = 0; i < n; ++i) AppendExtent(out, vec[i].start - start, vec[i].end - vec[i].start);
    if (arg.walk_end <= from) return Status::Io("PAGEMAP_SCAN made no progress");
    from = arg.walk_end;
  }
  return Status::Ok();
}

// Two walks, each re-protecting what it reports: (1) pages written since the
// last walk; (2) pages with neither a page nor a protection marker: they were
// dropped (MADV_DONTNEED zaps anonymous pages and their markers with them),
// so their content changed (to zeros) without a write. A page changed between
// the two walks is caught by one of them now or by (1) next time. On 6.18 (1)
// already reports such pages (an empty entry without a marker counts as
// written), so (2) finds nothing there; it stays as a guard for kernels that
// report them otherwise, for the cost of one more walk (measured within the
// Collect figures of docs/design.md).
Status UffdTracker::CollectAsync(uintptr_t start, size_t bytes, ExtentList& out) const {
  ExtentList written, dropped;
  CAIRN_RETURN_IF_ERROR(Scan(start, bytes, 0, PAGE_IS_WRITTEN, written));
  CAIRN_RETURN_IF_ERROR(Scan(start, bytes, PAGE_IS_PRESENT | PAGE_IS_SWAPPED, PAGE_IS_PRESENT | PAGE_IS_SWAPPED, dropped));
  written.insert(written.end(), dropped.begin(), dropped.end());
  std::sort(written.begin(), written.end(), [](const Extent& x, const Extent& y) { return x.offset < y.offset; });
  for (const Extent& e : written) AppendExtent(out, e.offset, e.bytes);  // merges overlaps
  return Status::Ok();
}

Status UffdTracker::CollectSync(uintptr_t start, Range& r, ExtentList& out) {
  r.bits->Take(PageSize(), out);
  for (const Extent& e : out) {
    // EAGAIN: a munmap/madvise event waits for our handler, which may wait for
    // mu_: release it while retrying (a page still writable meanwhile is in
    // this report, and the caller copies after we return).
    for (int tries = 0;; ++tries) {
      const int err = Protect(start + e.offset, e.bytes, true);
      if (err == 0) break;
      if (err != EAGAIN || tries > 10000) return Status::Io(Errno("UFFDIO_WRITEPROTECT (re-arm)", err));
      mu_.Unlock();
      ::sched_yield();
      mu_.Lock();
      if (!r.lost.empty()) return Status::Io(r.lost);
    }
  }
  return Status::Ok();
}

Result<Collection> UffdTracker::Collect(void* addr) {
  const auto start = reinterpret_cast<uintptr_t>(addr);
  if (!async_ && !InChild()) {
    // Before mu_, which the handler takes for faults.
    const uint64_t started = batches_started_.load(std::memory_order_seq_cst);
    for (uint64_t d = batches_done_.load(); d < started; d = batches_done_.load()) batches_done_.wait(d);
  }
  MutexLock l(&mu_);
  auto it = ranges_map_.find(start);
  if (it == ranges_map_.end()) return Status::NotFound("page tracking: no tracked range starts at this address");
  Range& r = it->second;
  const size_t bytes = r.bytes;
  Collection c;
  if (InChild()) {
    r.lost = "fork: a child process does not inherit page tracking";
  } else if (!RangeMapped(start, bytes)) {
    r.lost = "part of the range was unmapped (munmap) while tracked";
  } else if (r.lost.empty()) {
    Status s = async_ ? CollectAsync(start, bytes, c.written) : CollectSync(start, r, c.written);
    if (!s.ok() && r.lost.empty()) r.lost = s.message();
  }
  if (!r.lost.empty()) c.note = "page tracking lost: " + r.lost + "; the range is reported whole";
  if (r.first || !r.lost.empty()) {
    r.first = false;
    c.all = true;
    c.written.assign(1, Extent{0, bytes});
  }
  CountCollect(c, PageSize());
  return c;
}

// --- uffd-sync: the handler thread -----------------------------------------

void UffdTracker::MarkLost(uintptr_t start, uintptr_t end, const std::string& why) {
  MutexLock l(&mu_);
  for (auto& [s, r] : ranges_map_) {
    if (s < end && start < s + r.bytes && r.lost.empty()) r.lost = why;
  }
}

void UffdTracker::HandleFault(uintptr_t addr, std::vector<uintptr_t>& retry) {
  const size_t page = PageSize();
  addr = addr / page * page;
  MutexLock l(&mu_);
  auto it = ranges_map_.upper_bound(addr);
  if (it != ranges_map_.begin() && addr < std::prev(it)->first + std::prev(it)->second.bytes) {
    --it;
    it->second.bits->Set((addr - it->first) / page);
  }
  // Recorded first, released second, both under mu_: Collect never sees a
  // writable page that is not recorded. Unknown pages (untracked meanwhile)
  // are released too, so that no thread sleeps forever.
  faults_.fetch_add(1, std::memory_order_relaxed);
  const int err = Protect(addr, page, false);
  if (err == EAGAIN) {
    retry.push_back(addr);  // an event waits for us to read it: read, then retry
  } else if (err != 0) {
    uffdio_range r{addr, page};
    (void)::ioctl(uffd_, UFFDIO_WAKE, &r);
  }
}

void UffdTracker::HandlerLoop(std::stop_token st) {
  std::vector<uintptr_t> retry;
  while (!st.stop_requested()) {
    pollfd fds[2] = {{uffd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    // Pending retries poll with a short timeout (rare: an event raced a fault).
    if (::poll(fds, 2, retry.empty() ? -1 : 1) < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;
    uffd_msg msgs[16];
    batches_started_.fetch_add(1, std::memory_order_seq_cst);
    const ssize_t n = ::read(uffd_, msgs, sizeof msgs);
    for (ssize_t i = 0; n > 0 && i < n / static_cast<ssize_t>(sizeof(uffd_msg)); ++i) {
      const uffd_msg& m = msgs[i];
      switch (m.event) {
        case UFFD_EVENT_PAGEFAULT: HandleFault(m.arg.pagefault.address, retry); break;
        case UFFD_EVENT_UNMAP:
          MarkLost(m.arg.remove.start, m.arg.remove.end, "part of the range was unmapped (munmap)");
          break;
        case UFFD_EVENT_REMOVE:
          MarkLost(m.arg.remove.start, m.arg.remove.end,
                   "part of the range was dropped (madvise MADV_DONTNEED/MADV_REMOVE)");
          break;
        case UFFD_EVENT_REMAP:
          MarkLost(m.arg.remap.from, m.arg.remap.from + m.arg.remap.len, "the range was moved (mremap)");
          break;
        default: break;
      }
    }
    batches_done_.fetch_add(1, std::memory_order_seq_cst);
    batches_done_.notify_all();
    std::vector<uintptr_t> again;
    for (uintptr_t a : retry) HandleFault(a, again);
    retry.swap(again);
  }
}

}  // namespace

Result<std::unique_ptr<PageTracker>> NewUffdTracker(bool async) {
  uint64_t supported = 0;
  CAIRN_ASSIGN_OR_RETURN(int fd, uffd::Open(/*user_mode_first=*/async, &supported));
  if ((supported & UFFD_FEATURE_PAGEFAULT_FLAG_WP) == 0) {
    ::close(fd);
    return Status::Unsupported("the kernel's userfaultfd has no write-protect mode (Linux 5.7+)");
  }
  uint64_t want = UFFD_FEATURE_PAGEFAULT_FLAG_WP | (supported & UFFD_FEATURE_WP_UNPOPULATED);
  int pagemap = -1;
  if (async) {
    const uint64_t need = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED;
    if ((supported & need) != need) {
      ::close(fd);
      return Status::Unsupported("the kernel's userfaultfd lacks UFFD_FEATURE_WP_ASYNC/WP_UNPOPULATED (Linux 6.7+)");
    }
    want |= UFFD_FEATURE_WP_ASYNC;
    pagemap = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (pagemap < 0) {
      const int err = errno;
      ::close(fd);
      return Status::Unsupported(Errno("open /proc/self/pagemap", err));
    }
    pm_scan_arg probe{};
    probe.size = sizeof probe;
    if (::ioctl(pagemap, PAGEMAP_SCAN, &probe) < 0) {  // empty range: 0 where supported
      const int err = errno;
      ::close(pagemap);
      ::close(fd);
      return Status::Unsupported(Errno("PAGEMAP_SCAN ioctl (Linux 6.7+)", err));
    }
  } else {
    // Told of munmap/madvise/mremap of a tracked range by the handler thread.
    want |= supported & (UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_REMAP);
  }
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = want;
  if (::ioctl(fd, UFFDIO_API, &api) != 0) {
    const int err = errno;
    if (pagemap >= 0) ::close(pagemap);
    ::close(fd);
    return Status::Unsupported(Errno("UFFDIO_API", err));
  }
  auto t = std::make_unique<UffdTracker>(async, fd, pagemap, want);
  if (!async) CAIRN_RETURN_IF_ERROR(t->StartHandler());
  return std::unique_ptr<PageTracker>(std::move(t));
}

}  // namespace cairn::os::internal
