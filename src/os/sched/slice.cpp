// The calling thread's scheduler slice (slice.hpp).
#include "os/sched/slice.hpp"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#if defined(__linux__)
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__linux__) && defined(SYS_sched_setattr) && defined(SYS_sched_getattr)
#define CAIRN_SCHED_ATTR 1
#endif

namespace cairn::os {

namespace {

#ifdef CAIRN_SCHED_ATTR
// The kernel's struct sched_attr (include/uapi/linux/sched/types.h, first
// version: 48 bytes); glibc declares it only from 2.41 on.
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;  // SCHED_OTHER since 6.12: the slice, ns
  uint64_t sched_deadline;
  uint64_t sched_period;
};
static_assert(sizeof(SchedAttr) == 48);

// errno's failure of `call`: ENOSYS and EPERM (no such call here, or a
// seccomp sandbox refuses it) are kUnsupported, anything else kIo.
Status CallFailed(const char* call) {
  const int err = errno;
  std::string why = std::string(call) + ": " + std::strerror(err);
  if (err == ENOSYS || err == EPERM) return Status::Unsupported(std::move(why));
  return Status::Io(std::move(why));
}

bool GetAttr(SchedAttr* a) {
  std::memset(a, 0, sizeof *a);
  return syscall(SYS_sched_getattr, 0, a, sizeof *a, 0) == 0;
}
#endif

}  // namespace

std::chrono::microseconds CurrentSlice() {
#ifdef CAIRN_SCHED_ATTR
  SchedAttr a;
  if (GetAttr(&a) && a.sched_policy == SCHED_OTHER) {
    return std::chrono::microseconds(a.sched_runtime / 1000);
  }
#endif
  return std::chrono::microseconds(0);
}

Status RequestSlice(std::chrono::microseconds slice) {
#ifdef CAIRN_SCHED_ATTR
  SchedAttr a;
  if (!GetAttr(&a)) return CallFailed("sched_getattr");
  if (a.sched_policy != SCHED_OTHER) {
    return Status::Unsupported("a scheduler slice applies to SCHED_OTHER threads only");
  }
  a.size = sizeof a;
  a.sched_flags = 0;
  a.sched_runtime = static_cast<uint64_t>(slice.count()) * 1000;
  if (syscall(SYS_sched_setattr, 0, &a, 0) != 0) return CallFailed("sched_setattr");
  // Kernels before 6.12 accept the call and ignore sched_runtime for
  // SCHED_OTHER (and report 0): only the read-back says it took.
  if (CurrentSlice().count() == 0) {
    return Status::Unsupported(
        "this kernel keeps no scheduler slice per thread (Linux >= 6.12 does)");
  }
  return Status::Ok();
#else
  (void)slice;
  return Status::Unsupported("scheduler slices need Linux's sched_setattr");
#endif
}

}  // namespace cairn::os
