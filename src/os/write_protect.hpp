// Synchronous userfaultfd write-protection for zero-copy captures
// (docs/design.md, "Zero-copy captures"): a write to a protected page blocks
// the writing thread in the kernel and is reported to an owned handler thread,
// which decides whether to release the page now or later.
//
// Unlike os::PageTracker (which only records written pages), the handler may
// leave a faulting thread waiting: it returns false from the fault callback,
// and whoever later calls Release on that page wakes the thread.
//
// The fault callback runs on the handler thread. It must not allocate or take
// a lock the application could hold (the application thread that faulted may
// hold any of its own locks, and a malloc arena lock when the write was
// inside malloc).
//
// Thread safety: Register/Unregister/Protect/Release from any thread; the
// destructor stops the handler and unregisters everything (which removes the
// protection and wakes every blocked writer) before it returns.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "cairn/status.hpp"

namespace cairn::os {

class WriteProtect {
 public:
  // Called with the page-aligned address of a write fault on a registered
  // page. true: release the page now (the writer continues); false: leave the
  // writer blocked until Release covers the page.
  using FaultFn = std::function<bool(uintptr_t page)>;

  // kUnsupported naming the reason when synchronous write-protection is not
  // available (no userfaultfd, no write-protect mode, forked child).
  static Result<std::unique_ptr<WriteProtect>> Create(FaultFn on_fault);
  ~WriteProtect();
  WriteProtect(const WriteProtect&) = delete;
  WriteProtect& operator=(const WriteProtect&) = delete;

  // Registers page-aligned [addr, addr + bytes) for write-protection (not
  // protected yet). kUnsupported when the kernel refuses (another
  // userfaultfd owns the range, not anonymous private memory).
  Status Register(void* addr, size_t bytes);
  // Removes the registration (and so any protection; wakes blocked writers).
  Status Unregister(void* addr, size_t bytes);
  // Write-protects [start, start + len) of a registered range.
  Status Protect(uintptr_t start, size_t len);
  // Removes the protection of [start, start + len) and wakes its writers.
  Status Release(uintptr_t start, size_t len);

  // Write faults seen by the handler (for stats).
  uint64_t faults() const { return faults_.load(std::memory_order_relaxed); }

 private:
  WriteProtect(int uffd, int stop_fd, FaultFn fn);
  void Loop(std::stop_token st);
  void OnFault(uintptr_t addr);

  const int uffd_;
  const int stop_fd_;
  const FaultFn on_fault_;
  std::atomic<uint64_t> faults_{0};
  std::jthread handler_;
};

// Pages of page-aligned [addr, addr + bytes) that are write-protected by a
// userfaultfd now (bit 57 of /proc/self/pagemap): tests use it to check that
// no protection is left behind.
Result<uint64_t> CountUffdProtectedPages(const void* addr, size_t bytes);

}  // namespace cairn::os
