// Synchronous userfaultfd write-protection (os/protect/write_protect.hpp), and the
// mechanism-neutral pieces (Create, CountProtectedPages).
//
// The handler thread reads fault messages and asks the owner's callback what
// to do; pages left blocked are woken by the owner's later Release (a
// UFFDIO_WRITEPROTECT that clears the protection wakes the range's waiters).
// The kernel re-checks the protection after queueing a writer, so a Release
// that races the fault message cannot leave the writer asleep.
#include "os/protect/write_protect.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "os/mem/memory.hpp"
#include "os/protect/uffd.hpp"
#include "os/protect/uffd_uapi.hpp"

namespace cairn::os {
namespace {

using uffd::Errno;

// A negotiated userfaultfd with the write-protect mode; kernel-mode faults
// (read(2) into protected memory) are wanted, so USER_MODE_ONLY is the
// second choice.
Result<int> OpenWpUffd(uint64_t* features) {
  uint64_t supported = 0;
  CAIRN_ASSIGN_OR_RETURN(int fd, uffd::Open(/*user_mode_first=*/false, &supported));
  if ((supported & UFFD_FEATURE_PAGEFAULT_FLAG_WP) == 0) {
    ::close(fd);
    return Status::Unsupported("the kernel's userfaultfd has no write-protect mode (Linux 5.7+)");
  }
  const uint64_t want = UFFD_FEATURE_PAGEFAULT_FLAG_WP | (supported & UFFD_FEATURE_WP_UNPOPULATED);
  uffdio_api use{};
  use.api = UFFD_API;
  use.features = want;
  if (::ioctl(fd, UFFDIO_API, &use) != 0) {
    const int e = errno;
    ::close(fd);
    return Status::Unsupported(Errno("UFFDIO_API", e));
  }
  *features = want;
  return fd;
}

int WriteProtectIoctl(int fd, uintptr_t start, size_t len, bool wp) {
  for (int tries = 0;; ++tries) {
    const int err = uffd::Protect(fd, start, len, wp);
    // EAGAIN: the memory map is changing (rare); the change finishes without us.
    if (err != EAGAIN || tries > 10000) return err;
    ::sched_yield();
  }
}

std::atomic<uint64_t> g_features{0};  // negotiated features (same on every descriptor)

class UffdWriteProtect final : public WriteProtect {
 public:
  UffdWriteProtect(int uffd, int stop_fd, FaultFn fn)
      : WriteProtect(WpMechanism::kUserfaultfd, std::move(fn)), uffd_(uffd), stop_fd_(stop_fd) {
    handler_ = std::jthread([this](std::stop_token st) { Loop(st); });
  }
  ~UffdWriteProtect() override;
  Status Register(void* addr, size_t bytes) override;
  Status Unregister(void* addr, size_t bytes) override;
  Status Protect(uintptr_t start, size_t len) override;
  Status Release(uintptr_t start, size_t len) override;

 private:
  void Loop(std::stop_token st);
  void OnFault(uintptr_t addr);

  const int uffd_;
  const int stop_fd_;
  std::jthread handler_;
};

}  // namespace

const char* WpMechanismName(WpMechanism m) { return m == WpMechanism::kMprotect ? "mprotect" : "userfaultfd"; }

Result<std::unique_ptr<WriteProtect>> WriteProtect::Create(WpMechanism mechanism, FaultFn on_fault) {
  return mechanism == WpMechanism::kMprotect ? internal::NewMprotectWriteProtect(std::move(on_fault))
                                             : internal::NewUffdWriteProtect(std::move(on_fault));
}

Result<std::unique_ptr<WriteProtect>> internal::NewUffdWriteProtect(WriteProtect::FaultFn on_fault) {
  uint64_t features = 0;
  CAIRN_ASSIGN_OR_RETURN(int uffd, OpenWpUffd(&features));
  g_features.store(features, std::memory_order_relaxed);
  const int stop = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop < 0) {
    const int err = errno;
    ::close(uffd);
    return Status::Unsupported(Errno("eventfd", err));
  }
  return std::unique_ptr<WriteProtect>(std::make_unique<UffdWriteProtect>(uffd, stop, std::move(on_fault)));
}

UffdWriteProtect::~UffdWriteProtect() {
  const uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof one);
  handler_.request_stop();
  if (handler_.joinable()) handler_.join();
  // Closing the descriptor unregisters every range: protection goes and
  // blocked writers are woken.
  ::close(stop_fd_);
  ::close(uffd_);
}

Status UffdWriteProtect::Register(void* addr, size_t bytes) {
  const auto start = reinterpret_cast<uintptr_t>(addr);
  const size_t page = PageSize();
  if (addr == nullptr || bytes == 0 || start % page != 0 || bytes % page != 0) {
    return Status::InvalidArgument("zero-copy capture needs page-aligned memory (allocate it with cairn_alloc)");
  }
  return uffd::RegisterWp(uffd_, g_features.load(std::memory_order_relaxed), addr, bytes, "zero-copy capture",
                         "checkpoint.changes = pages tracks it, or another library");
}

Status UffdWriteProtect::Unregister(void* addr, size_t bytes) {
  uffdio_range r{reinterpret_cast<uintptr_t>(addr), bytes};
  if (::ioctl(uffd_, UFFDIO_UNREGISTER, &r) != 0) return Status::Io(Errno("UFFDIO_UNREGISTER", errno));
  return Status::Ok();
}

Status UffdWriteProtect::Protect(uintptr_t start, size_t len) {
  if (int err = WriteProtectIoctl(uffd_, start, len, true); err != 0) {
    return Status::Io(Errno("UFFDIO_WRITEPROTECT (protect)", err));
  }
  return Status::Ok();
}

Status UffdWriteProtect::Release(uintptr_t start, size_t len) {
  if (int err = WriteProtectIoctl(uffd_, start, len, false); err != 0) {
    return Status::Io(Errno("UFFDIO_WRITEPROTECT (release)", err));
  }
  return Status::Ok();
}

void UffdWriteProtect::OnFault(uintptr_t addr) {
  const size_t page = PageSize();
  addr = addr / page * page;
  faults_.fetch_add(1, std::memory_order_relaxed);
  if (on_fault_(addr)) {
    if (WriteProtectIoctl(uffd_, addr, page, false) != 0) {
      uffdio_range r{addr, page};  // never leave a writer asleep
      (void)::ioctl(uffd_, UFFDIO_WAKE, &r);
    }
  }
}

void UffdWriteProtect::Loop(std::stop_token st) {
  while (!st.stop_requested()) {
    pollfd fds[2] = {{uffd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;
    uffd_msg msgs[16];
    const ssize_t n = ::read(uffd_, msgs, sizeof msgs);
    for (ssize_t i = 0; n > 0 && i < n / static_cast<ssize_t>(sizeof(uffd_msg)); ++i) {
      if (msgs[i].event == UFFD_EVENT_PAGEFAULT) OnFault(msgs[i].arg.pagefault.address);
    }
  }
}

Result<uint64_t> CountUffdProtectedPages(const void* addr, size_t bytes) {
  const size_t page = PageSize();
  const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Io(Errno("open /proc/self/pagemap", errno));
  std::vector<uint64_t> entries(bytes / page);
  const off_t at = static_cast<off_t>(reinterpret_cast<uintptr_t>(addr) / page * sizeof(uint64_t));
  const ssize_t n = ::pread(fd, entries.data(), entries.size() * sizeof(uint64_t), at);
  const int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(entries.size() * sizeof(uint64_t))) return Status::Io(Errno("read /proc/self/pagemap", err));
  uint64_t count = 0;
  for (uint64_t e : entries) count += (e >> 57) & 1;  // PM_UFFD_WP
  return count;
}

namespace {

// Pages of [addr, addr + bytes) inside /proc/self/maps mappings that are
// readable and not writable (what mprotect(PROT_READ) leaves).
Result<uint64_t> CountReadOnlyPages(const void* addr, size_t bytes) {
  FILE* f = std::fopen("/proc/self/maps", "re");
  if (f == nullptr) return Status::Io(Errno("open /proc/self/maps", errno));
  const auto lo = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t hi = lo + bytes;
  uint64_t count = 0;
  char line[512];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long start = 0, end = 0;
    char perms[8] = {};
    if (std::sscanf(line, "%lx-%lx %7s", &start, &end, perms) != 3) continue;
    const uintptr_t a = std::max<uintptr_t>(start, lo), b = std::min<uintptr_t>(end, hi);
    if (a < b && perms[0] == 'r' && perms[1] != 'w') count += (b - a) / PageSize();
  }
  std::fclose(f);
  return count;
}

}  // namespace

Result<uint64_t> CountProtectedPages(WpMechanism mechanism, const void* addr, size_t bytes) {
  return mechanism == WpMechanism::kMprotect ? CountReadOnlyPages(addr, bytes) : CountUffdProtectedPages(addr, bytes);
}

}  // namespace cairn::os
