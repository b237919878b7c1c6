// Anonymous mappings for the host cache (os/mem/memory.hpp). The point of this
// file is less the system calls than the error messages: when the cache cannot
// be mapped or pinned, the user needs to know which limit to raise.
#include "os/mem/memory.hpp"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "cairn/config.hpp"  // FormatSize
#include "os/fs/fs.hpp"      // kDirectIoAlignment

namespace cairn::os {
namespace {

// First line of a /proc/sys file, or "?" when it cannot be read.
std::string ReadProcValue(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "?";
  return line;
}

// "1073741824 bytes (1 GiB)"
std::string Bytes(uint64_t n) { return std::to_string(n) + " bytes (" + FormatSize(n) + ")"; }

std::string Rlimit(rlim_t v) { return v == RLIM_INFINITY ? std::string("unlimited") : Bytes(v); }

// The "VmLck:" line of /proc/self/status (memory this process already has
// locked, which counts against the same limit), or "" if unavailable.
std::string LockedAlready() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmLck:", 0) == 0) {
      size_t b = line.find_first_not_of(" \t", 6);
      return b == std::string::npos ? std::string() : line.substr(b);
    }
  }
  return "";
}

Status MmapError(int err, size_t bytes) {
  std::string msg = "mmap of " + Bytes(bytes) + " for the host cache failed: " + std::strerror(err);
  if (err == ENOMEM || err == EAGAIN) {
    msg += "; the process ran out of address space, mappings or committable memory: check "
           "vm.max_map_count (now " + ReadProcValue("/proc/sys/vm/max_map_count") +
           "), vm.overcommit_memory (now " + ReadProcValue("/proc/sys/vm/overcommit_memory") +
           "), `ulimit -v`, or configure a smaller host_cache.size";
  }
  return Status::NoMemory(std::move(msg));
}

}  // namespace

size_t PageSize() {
  static const size_t page = [] {
    long p = ::sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<size_t>(p) : size_t{4096};
  }();
  return page;
}

uint64_t PhysicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  return pages > 0 ? uint64_t(pages) * PageSize() : 0;
}

uint64_t AvailableMemoryBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1) return uint64_t{kib} * 1024;
  }
  const long pages = ::sysconf(_SC_AVPHYS_PAGES);
  return pages > 0 ? uint64_t(pages) * PageSize() : 0;
}

Mapping::~Mapping() {
  if (data_ != nullptr) ::munmap(data_, size_);  // also drops any mlock
}

Mapping::Mapping(Mapping&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      locked_(std::exchange(other.locked_, false)) {}

Mapping& Mapping::operator=(Mapping&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    locked_ = std::exchange(other.locked_, false);
  }
  return *this;
}

Result<Mapping> Mapping::Create(size_t bytes, const MapOptions& options) {
  if (bytes == 0) return Status::InvalidArgument("mapping of 0 bytes");
  const size_t page = PageSize();
  if (bytes > SIZE_MAX - (page - 1)) return MmapError(ENOMEM, bytes);
  const size_t size = (bytes + page - 1) / page * page;

  // MAP_POPULATE faults pages in at mmap time, before madvise(MADV_HUGEPAGE)
  // could apply; with both options we map lazily, advise, then populate.
  const bool populate_now = options.populate && !options.huge_pages;
  int flags = MAP_PRIVATE | MAP_ANONYMOUS;
  // Lazy mappings do not reserve swap/commit charge up front, so a large cache
  // that is only partly used does not fail under strict overcommit accounting.
  if (!options.populate) flags |= MAP_NORESERVE;
  if (populate_now) flags |= MAP_POPULATE;

  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED) return MmapError(errno, size);

  Mapping m;
  m.data_ = static_cast<uint8_t*>(p);
  m.size_ = size;
  if (options.huge_pages) {
#ifdef MADV_HUGEPAGE
    // Best effort: THP may be disabled ("never") or unsupported; the mapping
    // works the same with small pages.
    (void)::madvise(p, size, MADV_HUGEPAGE);
#endif
    if (options.populate) TouchPages(p, size);
  }
  return m;
}

Status Mapping::Lock() {
  if (data_ == nullptr) return Status::State("mlock: no mapping");
  if (locked_) return Status::Ok();
  CAIRN_RETURN_IF_ERROR(LockRange(data_, size_));
  locked_ = true;
  return Status::Ok();
}

Status Mapping::Unlock() {
  if (data_ == nullptr || !locked_) return Status::Ok();
  CAIRN_RETURN_IF_ERROR(UnlockRange(data_, size_));
  locked_ = false;
  return Status::Ok();
}

Status LockRange(void* p, size_t n) {
  if (::mlock(p, n) == 0) return Status::Ok();
  const int err = errno;
  if (err == ENOMEM || err == EPERM || err == EAGAIN) {
    struct rlimit rl {};
    std::string limits = "unknown";
    if (::getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
      limits = Rlimit(rl.rlim_cur) + " (soft) / " + Rlimit(rl.rlim_max) + " (hard)";
    }
    std::string already = LockedAlready();
    return Status::NoMemory("mlock of " + Bytes(n) + " failed (" + std::strerror(err) +
                            "): RLIMIT_MEMLOCK is " + limits +
                            (already.empty() ? "" : ", already locked by this process: " + already) +
                            "; raise it with `ulimit -l` or limits.conf (memlock), or disable "
                            "pinning (host_cache.pin = false)");
  }
  return Status::NoMemory("mlock of " + Bytes(n) + " failed: " + std::strerror(err));
}

Status UnlockRange(void* p, size_t n) {
  if (::munlock(p, n) != 0) return Status::Io("munlock of " + Bytes(n) + " failed: " + std::strerror(errno));
  return Status::Ok();
}

namespace {
class MlockPinner final : public MemoryPinner {
 public:
  const char* name() const override { return "mlock"; }
  Status Pin(void* p, size_t n) override { return LockRange(p, n); }
  void Unpin(void* p, size_t n) override { (void)UnlockRange(p, n); }
};
}  // namespace

MemoryPinner* MemoryPinner::Mlock() {
  static MlockPinner pinner;
  return &pinner;
}

namespace {
#if defined(MADV_POPULATE_WRITE) && defined(MADV_POPULATE_READ)
// Whether the running kernel knows the advice (Linux 5.14+), asked once on a
// page of our own: a call's EINVAL may also mean that its range cannot be
// populated (VM_IO, VM_PFNMAP), which must not turn the advice off for good.
bool PopulateSupported(bool write) {
  static const auto probe = [](int advice) {
    const size_t page = PageSize();
    void* p = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return true;  // cannot tell: let the real call answer
    const bool ok = ::madvise(p, page, advice) == 0 || errno != EINVAL;
    ::munmap(p, page);
    return ok;
  };
  static const bool read_ok = probe(MADV_POPULATE_READ);
  static const bool write_ok = probe(MADV_POPULATE_WRITE);
  return write ? write_ok : read_ok;
}
#endif
}  // namespace

int PopulatePages(const void* p, size_t n, bool write) {
#if defined(MADV_POPULATE_WRITE) && defined(MADV_POPULATE_READ)
  if (!PopulateSupported(write)) return EINVAL;
  const size_t page = PageSize();
  const uintptr_t start = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + n;
  if (::madvise(reinterpret_cast<void*>(start), end - start, write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0)
    return 0;
  return errno;
#else
  (void)p;
  (void)n;
  (void)write;
  return EINVAL;
#endif
}

void TouchPages(void* p, size_t n) {
  if (n == 0) return;
  // One write fault per page, taken in the kernel without returning to user
  // space: 3.4 GB/s against 1.9 GB/s for TouchPagesOneByOne on 4 KiB pages
  // here (whose read-then-write takes two faults per page, the read mapping
  // the zero page); the same with THP. It leaves contents as they are, so it
  // is also safe against concurrent writers. Other errors than EINVAL
  // (ENOMEM, EINTR, EFAULT, EHWPOISON): touching by hand faults the same
  // pages and meets the same condition where it is real.
  if (PopulatePages(p, n, true) == 0) return;
  TouchPagesOneByOne(p, n);
}

void TouchPagesOneByOne(void* p, size_t n) {
  if (n == 0) return;
  // Read each byte and write the same value back: a read alone would map the
  // shared zero page and the first real write would still fault; the write
  // makes the page private and writable while preserving its content.
  // Precondition: no other thread writes [p, p+n) concurrently (a write could
  // be lost between our read and write).
  const size_t page = PageSize();
  auto* base = static_cast<volatile uint8_t*>(p);
  const uintptr_t start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t end = start + n;
  for (uintptr_t a = start; a < end; a = (a / page + 1) * page) {
    volatile uint8_t* b = base + (a - start);
    *b = *b;
  }
}

DirectBuffer AllocDirectBuffer(size_t bytes) {
  const size_t n = std::max<size_t>((bytes + kDirectIoAlignment - 1) / kDirectIoAlignment, 1) *
                   kDirectIoAlignment;
  void* p = std::aligned_alloc(kDirectIoAlignment, n);
  if (p != nullptr) std::memset(p, 0, n);
  return DirectBuffer(static_cast<uint8_t*>(p));
}

}  // namespace cairn::os
