// The OS layer for memory: anonymous mappings, advice, locking. Compact on
// purpose (mimalloc's os layer is the model): each function states its
// preconditions, and errors explain the limit that was hit (RLIMIT_MEMLOCK,
// vm.max_map_count, overcommit) rather than just errno.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "cairn/status.hpp"

namespace cairn::os {

size_t PageSize();
// The machine's RAM (sysconf); 0 when unknown.
uint64_t PhysicalMemoryBytes();
// What the kernel says could be allocated now without swapping
// (/proc/meminfo MemAvailable, else free pages from sysconf); 0 when unknown.
uint64_t AvailableMemoryBytes();

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using DirectBuffer = std::unique_ptr<uint8_t, FreeDeleter>;
// A zero-filled buffer of `bytes` (rounded up to os::kDirectIoAlignment,
// os/fs/fs.hpp) aligned
// for direct I/O; null when out of memory.
DirectBuffer AllocDirectBuffer(size_t bytes);

struct MapOptions {
  bool populate = false;   // MAP_POPULATE: fault every page in now (slow, eager)
  bool huge_pages = false; // madvise(MADV_HUGEPAGE) (transparent huge pages)
};

// An anonymous private read/write mapping, unmapped by the destructor.
class Mapping {
 public:
  Mapping() = default;
  ~Mapping();
  Mapping(Mapping&& other) noexcept;
  Mapping& operator=(Mapping&& other) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  // bytes > 0; rounded up to the page size. The memory is zero-filled.
  static Result<Mapping> Create(size_t bytes, const MapOptions& options);

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

  // mlock the whole mapping. kNoMemory with a message naming RLIMIT_MEMLOCK
  // (current limit and what is needed) when the limit is the cause.
  Status Lock();
  Status Unlock();
  bool locked() const { return locked_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool locked_ = false;
};

// madvise(MADV_POPULATE_WRITE, or _READ when !write) over the pages of
// [p, p+n): faults them in inside the kernel and reports a failure as an
// errno instead of a signal. 0 on success; EINVAL on a kernel without the
// advice (Linux < 5.14, asked once per process; the headers' lack of it
// answers EINVAL too), otherwise madvise's errno (EINVAL also for a range the
// kernel cannot populate, EFAULT where an access would have faulted).
// Precondition: n > 0.
int PopulatePages(const void* p, size_t n, bool write);
// Faults every page of [p, p+n) in, writable, so later writes do not fault;
// contents are preserved. PopulatePages where the kernel has it, else
// TouchPagesOneByOne (and its precondition).
void TouchPages(void* p, size_t n);
// Reads and writes back one byte per page. Precondition: no other thread
// writes [p, p+n) meanwhile (a write could be lost between the read and the
// write back). The fallback of TouchPages, exposed for tests.
void TouchPagesOneByOne(void* p, size_t n);

// mlock/munlock of [p, p+n). A failed LockRange returns kNoMemory with a
// message naming RLIMIT_MEMLOCK (current limit, what is already locked, and
// what is needed) when the limit is the cause.
Status LockRange(void* p, size_t n);
Status UnlockRange(void* p, size_t n);

// The seam through which the host cache is pinned once it is fully touched:
// mlock by default; the GPU backend registers the range with the driver
// (cuMemHostRegister) instead, and tests inject failures.
class MemoryPinner {
 public:
  virtual ~MemoryPinner() = default;
  virtual const char* name() const = 0;  // for messages: "mlock", ...
  // Pins [p, p+n) as one range (never piecewise: one registration is what
  // DMA engines want, and the cost is per call as much as per byte).
  virtual Status Pin(void* p, size_t n) = 0;
  // Undoes a successful Pin of the same range. Errors are ignored: it runs at
  // close, right before the memory is unmapped.
  virtual void Unpin(void* p, size_t n) = 0;

  // The process-wide mlock pinner (stateless).
  static MemoryPinner* Mlock();
};

}  // namespace cairn::os
