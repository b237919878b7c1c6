// mprotect + SIGSEGV write-protection for zero-copy captures
// (os/protect/write_protect.hpp): the fallback where userfaultfd write-protection is
// missing (no userfaultfd, vm.unprivileged_userfaultfd=0 without
// CAP_SYS_PTRACE, kernels before 5.7).
//
// Protect makes pages PROT_READ; a write to one raises SIGSEGV in the writing
// thread, where the shared handler (os/protect/segv_handler.hpp) calls OnWrite: the
// owner's callback decides, and either the page is made writable and the
// write retried, or the thread sleeps on the handler's futex until a Release
// or Unregister (which unprotect, then wake every sleeper) and retries the
// write, faulting again if its own page is still protected. The futex word is
// read before the callback runs, so a Release between the callback and the
// sleep is never missed.
//
// Costs against userfaultfd: every mprotect of part of a mapping splits it
// (VMAs), and they merge again when the protection goes. Begin's ranges are
// protected whole extent by extent, Release unprotects runs of pages; single
// pages are unprotected only for ORANGE writes (at most one per COW slot at
// a time), so the number of VMAs stays near twice the COW slots in use. An
// mprotect the kernel refuses in the handler (ENOMEM at vm.max_map_count)
// leaves the writer waiting for the page's Release, or the epoch's end.
#include <sched.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "os/mem/memory.hpp"
#include "os/protect/segv_handler.hpp"
#include "os/protect/write_protect.hpp"
#include "util/mutex.hpp"

namespace cairn::os {
namespace {

std::string ErrnoText(const char* what, int err) { return std::string(what) + ": " + std::strerror(err); }

class MprotectWriteProtect final : public WriteProtect {
 public:
  explicit MprotectWriteProtect(FaultFn fn) : WriteProtect(WpMechanism::kMprotect, std::move(fn)) {}

  ~MprotectWriteProtect() override {
    MutexLock l(&mu_);
    for (const Claimed& c : claimed_) Drop(c);
    claimed_.clear();
  }

  Status Register(void* addr, size_t bytes) override {
    const auto start = reinterpret_cast<uintptr_t>(addr);
    const size_t page = PageSize();
    if (addr == nullptr || bytes == 0 || start % page != 0 || bytes % page != 0) {
      return Status::InvalidArgument("zero-copy capture needs page-aligned memory (allocate it with cairn_alloc)");
    }
    if (!segv::HandlerIsOurs()) {
      // Our read-only pages would fault into a handler that does not know them.
      return Status::Unsupported("zero-copy capture (mprotect): another SIGSEGV handler replaced Cairn's (install "
                                 "the application's before the first zero-copy checkpoint: Cairn chains to it)");
    }
    CAIRN_ASSIGN_OR_RETURN(int slot, segv::Claim(start, bytes, &OnWrite, this, "zero-copy capture"));
    MutexLock l(&mu_);
    claimed_.push_back(Claimed{start, bytes, slot});
    return Status::Ok();
  }

  Status Unregister(void* addr, size_t bytes) override {
    const auto start = reinterpret_cast<uintptr_t>(addr);
    MutexLock l(&mu_);
    for (auto it = claimed_.begin(); it != claimed_.end(); ++it) {
      if (it->start != start || it->bytes != bytes) continue;
      Drop(*it);
      claimed_.erase(it);
      return Status::Ok();
    }
    return Status::NotFound("zero-copy capture: the range to unregister was not registered");
  }

  Status Protect(uintptr_t start, size_t len) override {
    if (::mprotect(reinterpret_cast<void*>(start), len, PROT_READ) != 0) {
      return Status::Io(ErrnoText("mprotect(PROT_READ) (protect)", errno));
    }
    return Status::Ok();
  }

  Status Release(uintptr_t start, size_t len) override {
    const int rc = ::mprotect(reinterpret_cast<void*>(start), len, PROT_READ | PROT_WRITE);
    const int err = errno;
    segv::WakeWaiters();  // even on failure: sleepers retry and wait again
    if (rc != 0) return Status::Io(ErrnoText("mprotect(PROT_READ | PROT_WRITE) (release)", err));
    return Status::Ok();
  }

 private:
  struct Claimed {
    uintptr_t start;
    size_t bytes;
    int slot;
  };

  // Writable again (ignoring memory the application unmapped), sleepers
  // woken, then the slot freed once no handler is inside OnWrite.
  static void Drop(const Claimed& c) {
    (void)::mprotect(reinterpret_cast<void*>(c.start), c.bytes, PROT_READ | PROT_WRITE);
    segv::WakeWaiters();
    segv::Unclaim(c.slot);
  }

  // In the writing thread's SIGSEGV handler. Callbacks run one at a time,
  // as on userfaultfd's single handler thread (the owner's fault logic is
  // written for one handler: a single consumer of its COW slots): a spin
  // lock, held for one callback and one mprotect, never while sleeping.
  static segv::Action OnWrite(void* ctx, uintptr_t page) {
    auto* self = static_cast<MprotectWriteProtect*>(ctx);
    while (self->busy_.exchange(true, std::memory_order_acquire)) ::sched_yield();
    self->faults_.fetch_add(1, std::memory_order_relaxed);
    segv::Action action = segv::Action::kWait;
    if (self->on_fault_(page) &&
        ::mprotect(reinterpret_cast<void*>(page), PageSize(), PROT_READ | PROT_WRITE) == 0) {
      action = segv::Action::kRetry;  // else wait: see the top of the file
    }
    self->busy_.store(false, std::memory_order_release);
    return action;
  }

  Mutex mu_;
  std::vector<Claimed> claimed_ CAIRN_GUARDED_BY(mu_);
  std::atomic<bool> busy_{false};  // the callbacks' spin lock
};

}  // namespace

Result<std::unique_ptr<WriteProtect>> internal::NewMprotectWriteProtect(WriteProtect::FaultFn on_fault) {
  CAIRN_RETURN_IF_ERROR(segv::Install());
  return std::unique_ptr<WriteProtect>(std::make_unique<MprotectWriteProtect>(std::move(on_fault)));
}

}  // namespace cairn::os
