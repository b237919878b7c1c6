// Transparent huge pages of application memory (os/huge_pages.hpp).
#include "os/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <map>

#include "util/mutex.hpp"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25  // Linux 6.1 (the headers here may be older than the kernel)
#endif

namespace cairn::os {
namespace {

struct Advised {
  Mutex mu;
  std::map<uintptr_t, size_t> ranges CAIRN_GUARDED_BY(mu);  // start -> bytes
};

Advised& Table() {
  static Advised* t = new Advised;  // never destroyed: cairn_free may run at exit
  return *t;
}

// Whether [a, a + n) lies in one advised range.
bool Covered(Advised& t, uintptr_t a, size_t n) CAIRN_REQUIRES(t.mu) {
  auto it = t.ranges.upper_bound(a);
  if (it == t.ranges.begin()) return false;
  --it;
  return a + n <= it->first + it->second;
}

}  // namespace

void AdviseHugePages(void* p, size_t n) {
#ifdef MADV_HUGEPAGE
  (void)::madvise(p, n, MADV_HUGEPAGE);
#endif
  Advised& t = Table();
  MutexLock l(&t.mu);
  t.ranges[reinterpret_cast<uintptr_t>(p)] = n;
}

void ForgetHugePages(void* p) {
  Advised& t = Table();
  MutexLock l(&t.mu);
  t.ranges.erase(reinterpret_cast<uintptr_t>(p));
}

size_t RestoreHugePages(const void* p, size_t n, const std::function<bool()>& stop) {
  const auto start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t from = (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  size_t done = 0;
  for (uintptr_t a = from; a + kHugePageBytes <= start + n && !stop(); a += kHugePageBytes) {
    {
      Advised& t = Table();
      MutexLock l(&t.mu);
      // Checked per span, not held across the madvise: a cairn_free of the
      // range meanwhile is the caller's error (its memory is in use).
      if (!Covered(t, a, kHugePageBytes)) continue;
    }
    if (::madvise(reinterpret_cast<void*>(a), kHugePageBytes, MADV_COLLAPSE) == 0) done += kHugePageBytes;
  }
  return done;
}

}  // namespace cairn::os
