// Synchronous write-protection for zero-copy captures (docs/design.md,
// "Zero-copy captures"): a write to a protected page stops the writing
// thread and asks the owner's fault callback whether to release the page now
// or later. Two mechanisms behind one interface:
//   userfaultfd  the writer blocks in the kernel; the callback runs on an
//                owned handler thread (write_protect.cpp).
//   mprotect     the pages are PROT_READ; the callback runs in the writing
//                thread's SIGSEGV handler (os/protect/segv_handler.hpp, shared with
//                the mprotect page tracker), and a writer left waiting sleeps
//                on a futex there (write_protect_mprotect.cpp). Faults that
//                are not ours go to the application's previous handler.
//
// The callback may leave a faulting thread waiting: it returns false, and
// whoever later calls Release on that page wakes the thread. Callbacks never
// run concurrently with each other (one handler thread; mprotect: a spin
// lock), so the owner's fault logic may be single-consumer.
//
// The fault callback must not allocate or take a lock the application could
// hold (the thread that faulted may hold any of its own locks, and a malloc
// arena lock when the write was inside malloc; with mprotect the callback
// runs on that very thread, inside a signal handler).
//
// Thread safety: Register/Unregister/Protect/Release from any thread; the
// destructor removes every protection and wakes every blocked writer before
// it returns.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "cairn/status.hpp"

namespace cairn::os {

enum class WpMechanism : uint8_t { kUserfaultfd = 0, kMprotect = 1 };
const char* WpMechanismName(WpMechanism m);  // "userfaultfd", "mprotect"

class WriteProtect {
 public:
  // Called with the page-aligned address of a write fault on a registered
  // page. true: release the page now (the writer continues); false: leave the
  // writer blocked until Release covers the page.
  using FaultFn = std::function<bool(uintptr_t page)>;

  // kUnsupported naming the reason when the mechanism is not available here
  // (userfaultfd: none, no write-protect mode, forked child; mprotect: the
  // SIGSEGV handler cannot be installed).
  static Result<std::unique_ptr<WriteProtect>> Create(WpMechanism mechanism, FaultFn on_fault);
  virtual ~WriteProtect() = default;
  WriteProtect(const WriteProtect&) = delete;
  WriteProtect& operator=(const WriteProtect&) = delete;

  WpMechanism mechanism() const { return mechanism_; }

  // Registers page-aligned [addr, addr + bytes) for write-protection (not
  // protected yet). kUnsupported when it cannot be protected (another
  // userfaultfd or mprotect user owns the range, not anonymous private
  // memory, the application replaced the SIGSEGV handler).
  virtual Status Register(void* addr, size_t bytes) = 0;
  // Removes the registration (and so any protection; wakes blocked writers).
  virtual Status Unregister(void* addr, size_t bytes) = 0;
  // Write-protects [start, start + len) of a registered range.
  virtual Status Protect(uintptr_t start, size_t len) = 0;
  // Removes the protection of [start, start + len) and wakes its writers.
  virtual Status Release(uintptr_t start, size_t len) = 0;

  // Write faults seen (for stats; with mprotect a writer woken while its page
  // is still protected faults again and is counted again).
  uint64_t faults() const { return faults_.load(std::memory_order_relaxed); }

 protected:
  WriteProtect(WpMechanism mechanism, FaultFn on_fault) : mechanism_(mechanism), on_fault_(std::move(on_fault)) {}

  const WpMechanism mechanism_;
  const FaultFn on_fault_;
  std::atomic<uint64_t> faults_{0};
};

namespace internal {
Result<std::unique_ptr<WriteProtect>> NewUffdWriteProtect(WriteProtect::FaultFn on_fault);
Result<std::unique_ptr<WriteProtect>> NewMprotectWriteProtect(WriteProtect::FaultFn on_fault);
}  // namespace internal

// Pages of page-aligned [addr, addr + bytes) write-protected by `mechanism`
// now (tests use it to check that no protection is left behind): userfaultfd,
// bit 57 of /proc/self/pagemap; mprotect, pages of /proc/self/maps mappings
// that are readable and not writable.
Result<uint64_t> CountProtectedPages(WpMechanism mechanism, const void* addr, size_t bytes);

// The userfaultfd half of CountProtectedPages.
Result<uint64_t> CountUffdProtectedPages(const void* addr, size_t bytes);

}  // namespace cairn::os
