// Tracked memory: cairn::Alloc / cairn::Free (cairn.hpp) and cairn_alloc /
// cairn_free (cairn.h). Page tracking needs page-aligned ranges, and malloc
// gives no such promise, hence an allocator of our own: anonymous mappings,
// huge-page aligned when large. Sizes are kept in a table (not in a header
// before the block: that would cost a page, or 2 MiB when huge-aligned).
#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "cairn/cairn.hpp"
#include "cairn/config.hpp"  // FormatSize
#include "os/huge_pages.hpp"
#include "os/memory.hpp"
#include "util/mutex.hpp"

namespace cairn {
namespace {

// Transparent huge pages are 2 MiB on x86-64 (and arm64 with 4 KiB pages);
// a THP can only back a 2 MiB-aligned 2 MiB extent of the mapping.
constexpr size_t kHugePage = os::kHugePageBytes;

struct Allocations {
  Mutex mu;
  std::map<uintptr_t, size_t> sizes CAIRN_GUARDED_BY(mu);  // start -> mapped bytes
};

Allocations& Table() {
  static Allocations* t = new Allocations;  // never destroyed: Free may run at exit
  return *t;
}

}  // namespace

Result<void*> Alloc(size_t bytes) {
  if (bytes == 0) return Status::InvalidArgument("cairn_alloc of 0 bytes");
  const size_t page = os::PageSize();
  const bool huge = bytes >= kHugePage;
  const size_t align = huge ? kHugePage : page;
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
    os::AdviseHugePages(reinterpret_cast<void*>(start), size);  // best effort (THP may be off)
  }
  Allocations& t = Table();
  MutexLock l(&t.mu);
  t.sizes[start] = size;
  return reinterpret_cast<void*>(start);
}

Status Free(void* ptr) {
  if (ptr == nullptr) return Status::Ok();
  Allocations& t = Table();
  size_t size = 0;
  {
    MutexLock l(&t.mu);
    auto it = t.sizes.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == t.sizes.end()) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%p", ptr);
      return Status::InvalidArgument(std::string("cairn_free: ") + buf +
                                     " was not returned by cairn_alloc, or was already freed");
    }
    size = it->second;
    t.sizes.erase(it);
  }
  os::ForgetHugePages(ptr);
  if (::munmap(ptr, size) != 0) return Status::Io(std::string("cairn_free: munmap failed: ") + std::strerror(errno));
  return Status::Ok();
}

}  // namespace cairn
