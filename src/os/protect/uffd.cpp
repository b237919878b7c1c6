#include "os/protect/uffd.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "os/mem/memory.hpp"
#include "os/protect/uffd_uapi.hpp"

namespace cairn::os::uffd {

std::string Errno(const char* what, int err) { return std::string(what) + ": " + std::strerror(err); }

Result<int> Open(bool user_mode_first, uint64_t* supported) {
  auto open_one = [user_mode_first]() -> int {
    const int base = O_CLOEXEC | O_NONBLOCK;
    const int first = user_mode_first ? base | UFFD_USER_MODE_ONLY : base;
    const int second = user_mode_first ? base : base | UFFD_USER_MODE_ONLY;
    int fd = static_cast<int>(::syscall(SYS_userfaultfd, first));
    if (fd < 0 && (errno == EINVAL || errno == EPERM)) fd = static_cast<int>(::syscall(SYS_userfaultfd, second));
    return fd;
  };
  int probe = open_one();
  if (probe < 0) {
    const int err = errno;
    std::string m = Errno("userfaultfd()", err);
    if (err == EPERM) m += " (vm.unprivileged_userfaultfd=0 and no CAP_SYS_PTRACE)";
    if (err == ENOSYS) m += " (kernel built without CONFIG_USERFAULTFD)";
    return Status::Unsupported(std::move(m));
  }
  uffdio_api api{};
  api.api = UFFD_API;
  const int rc = ::ioctl(probe, UFFDIO_API, &api);
  const int err = errno;
  ::close(probe);
  if (rc != 0) return Status::Unsupported(Errno("UFFDIO_API", err));
  *supported = api.features;
  int fd = open_one();
  if (fd < 0) return Status::Unsupported(Errno("userfaultfd()", errno));
  return fd;
}

Status RegisterWp(int fd, uint64_t features, void* addr, size_t bytes, std::string_view who,
                  std::string_view busy_hint) {
  if ((features & UFFD_FEATURE_WP_UNPOPULATED) == 0) TouchPages(addr, bytes);
  uffdio_register reg{};
  reg.range.start = reinterpret_cast<uintptr_t>(addr);
  reg.range.len = bytes;
  reg.mode = UFFDIO_REGISTER_MODE_WP;
  if (::ioctl(fd, UFFDIO_REGISTER, &reg) == 0) return Status::Ok();
  const int err = errno;
  const std::string prefix(who);
  if (err == EBUSY) {
    return Status::Unsupported(prefix + ": the range is already registered with another userfaultfd (" +
                               std::string(busy_hint) + ")");
  }
  return Status::Unsupported(Errno((prefix + ": UFFDIO_REGISTER (write-protect mode) of the range").c_str(), err) +
                             (err == EINVAL ? " (not anonymous private memory?)" : ""));
}

int Protect(int fd, uintptr_t start, size_t len, bool wp) {
  uffdio_writeprotect w{};
  w.range.start = start;
  w.range.len = len;
  w.mode = wp ? UFFDIO_WRITEPROTECT_MODE_WP : 0;
  return ::ioctl(fd, UFFDIO_WRITEPROTECT, &w) == 0 ? 0 : errno;
}

}  // namespace cairn::os::uffd
