// The mappings behind cairn_alloc (os/mem/mappings.hpp).
#include "os/mem/mappings.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "cairn/config.hpp"  // FormatSize
#include "os/mem/memory.hpp"
#include "util/mutex.hpp"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25  // Linux 6.1 (the headers here may be older than the kernel)
#endif

namespace cairn::os {
namespace {

struct Mapped {
  size_t bytes = 0;
  bool huge = false;  // 2 MiB-aligned and advised: RestoreHugePages may collapse it
};

struct Table {
  Mutex mu;
  std::map<uintptr_t, Mapped> by_start CAIRN_GUARDED_BY(mu);
};

Table& Mappings() {
  static Table* t = new Table;  // never destroyed: cairn_free may run at exit
  return *t;
}

// Whether [a, a + n) lies in one huge mapping.
bool InHugeMapping(Table& t, uintptr_t a, size_t n) CAIRN_REQUIRES(t.mu) {
  auto it = t.by_start.upper_bound(a);
  if (it == t.by_start.begin()) return false;
  --it;
  return it->second.huge && a + n <= it->first + it->second.bytes;
}

}  // namespace

Result<void*> Map(size_t bytes) {
  const bool huge = bytes >= kHugePageBytes;
  const size_t align = huge ? kHugePageBytes : PageSize();
  if (bytes > SIZE_MAX / 2) return Status::NoMemory("cairn_alloc of " + std::to_string(bytes) + " bytes: too large");
  const size_t size = (bytes + align - 1) / align * align;
  // Over-map by the alignment and trim both ends: mmap only promises pages.
  const size_t span = huge ? size + align : size;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    const int err = errno;
    return Status::NoMemory("cairn_alloc of " + std::to_string(bytes) + " bytes (" + FormatSize(bytes) +
                            "): mmap failed: " + std::strerror(err) +
                            (err == ENOMEM ? " (check vm.overcommit_memory, vm.max_map_count, ulimit -v)" : ""));
  }
  auto start = reinterpret_cast<uintptr_t>(raw);
  if (huge) {
    const uintptr_t aligned = (start + align - 1) / align * align;
    if (aligned > start) ::munmap(raw, aligned - start);
    const uintptr_t tail = aligned + size;
    if (start + span > tail) ::munmap(reinterpret_cast<void*>(tail), start + span - tail);
    start = aligned;
#ifdef MADV_HUGEPAGE
    (void)::madvise(reinterpret_cast<void*>(start), size, MADV_HUGEPAGE);  // best effort
#endif
  }
  Table& t = Mappings();
  MutexLock l(&t.mu);
  t.by_start[start] = Mapped{.bytes = size, .huge = huge};
  return reinterpret_cast<void*>(start);
}

Status Unmap(void* p) {
  Table& t = Mappings();
  size_t size = 0;
  {
    MutexLock l(&t.mu);
    auto it = t.by_start.find(reinterpret_cast<uintptr_t>(p));
    if (it == t.by_start.end()) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%p", p);
      return Status::InvalidArgument(std::string("cairn_free: ") + buf +
                                     " was not returned by cairn_alloc, or was already freed");
    }
    size = it->second.bytes;
    t.by_start.erase(it);
  }
  if (::munmap(p, size) != 0) return Status::Io(std::string("cairn_free: munmap failed: ") + std::strerror(errno));
  return Status::Ok();
}

size_t RestoreHugePages(const void* p, size_t n, const std::function<bool()>& stop) {
  const auto start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t from = (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  size_t done = 0;
  for (uintptr_t a = from; a + kHugePageBytes <= start + n && !stop(); a += kHugePageBytes) {
    {
      Table& t = Mappings();
      MutexLock l(&t.mu);
      // Checked per span, not held across the madvise: a cairn_free of the
      // range meanwhile is the caller's error (its memory is in use).
      if (!InHugeMapping(t, a, kHugePageBytes)) continue;
    }
    if (::madvise(reinterpret_cast<void*>(a), kHugePageBytes, MADV_COLLAPSE) == 0) done += kHugePageBytes;
  }
  return done;
}

}  // namespace cairn::os
