// BackedByHugePages (page_backing.hpp): the range's own pages from the
// PAGEMAP_SCAN ioctl where the kernel has it (Linux 6.7), else one pass over
// /proc/self/smaps.
//
// Why not smaps alone: reading smaps walks the page tables of every mapping
// of the process, 11 ms per GiB resident in 4 KiB pages here (67 ms at
// 8 GiB), so a restore into a large application paid it once per region of
// 64 MiB or more. PAGEMAP_SCAN walks only the pages asked about: 64 sampled
// windows of any range took 0.5 ms.
#include "os/mem/page_backing.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>

#include "os/mem/memory.hpp"

// The PAGEMAP_SCAN ABI (include/uapi/linux/fs.h, Linux 6.7), for C
// libraries whose kernel headers predate it; the kernel that lacks it
// answers ENOTTY and smaps is read instead.
#ifndef PAGEMAP_SCAN
struct page_region {
  uint64_t start, end, categories;
};
struct pm_scan_arg {
  uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted,
      category_mask, category_anyof_mask, return_mask;
};
#define PAGE_IS_PRESENT (1 << 3)
#define PAGE_IS_HUGE (1 << 6)
#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#endif

namespace cairn::os {
namespace {

// What smaps says of one mapping (values in kB, as smaps gives them).
struct Vma {
  uintptr_t start = 0, end = 0;
  uint64_t rss_kb = 0, anon_huge_kb = 0, kernel_page_kb = 0;
  bool thp_eligible = false;
};

bool Huge(const Vma& v) {
  if (v.kernel_page_kb * 1024 > PageSize()) return true;  // hugetlbfs
  if (v.rss_kb == 0) return v.thp_eligible;
  return v.anon_huge_kb * 4 >= v.rss_kb * 3;
}

// "Name:   123 kB" -> 123 into *out when the line starts with name.
bool Field(const std::string& line, const char* name, uint64_t* out) {
  const size_t len = std::strlen(name);
  if (line.compare(0, len, name) != 0) return false;
  *out = std::strtoull(line.c_str() + len, nullptr, 10);
  return true;
}

// Bytes of present pages, and of those in huge pages.
struct Present {
  uint64_t bytes = 0, huge = 0;
};

// Adds [lo, hi)'s present pages from PAGEMAP_SCAN on `fd` (/proc/self/
// pagemap), whose regions merge runs of pages of the same categories (a
// range of one page size is a region or two); false when the kernel has no
// PAGEMAP_SCAN or the scan fails.
bool Scan(int fd, uintptr_t lo, uintptr_t hi, Present* out) {
  page_region vec[64];
  for (uintptr_t at = lo; at < hi;) {
    pm_scan_arg arg{.size = sizeof(pm_scan_arg),
                    .start = at,
                    .end = hi,
                    .vec = reinterpret_cast<uintptr_t>(vec),
                    .vec_len = sizeof vec / sizeof vec[0],
                    .category_mask = PAGE_IS_PRESENT,
                    .return_mask = PAGE_IS_PRESENT | PAGE_IS_HUGE};
    const int got = ::ioctl(fd, PAGEMAP_SCAN, &arg);
    if (got < 0 || arg.walk_end <= at) return false;
    for (int i = 0; i < got; ++i) {
      out->bytes += vec[i].end - vec[i].start;
      if (vec[i].categories & PAGE_IS_HUGE) out->huge += vec[i].end - vec[i].start;
    }
    at = arg.walk_end;
  }
  return true;
}

// A large range is judged by samples, as SampledPagesResident does: kSamples
// windows of kSampleBytes spread over it (a whole GiB of 4 KiB pages took
// 3.5 ms to scan here).
constexpr size_t kSamples = 64;
constexpr uint64_t kSampleBytes = 2u << 20;

// [lo, hi)'s present pages, or its samples'; nullopt without PAGEMAP_SCAN.
std::optional<Present> ScanPresent(uintptr_t lo, uintptr_t hi) {
  const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  Present out;
  bool ok = true;
  if (hi - lo <= kSamples * kSampleBytes) {
    ok = Scan(fd, lo, hi, &out);
  } else {
    const uintptr_t page = PageSize(), last = hi - kSampleBytes;
    for (size_t i = 0; ok && i < kSamples; ++i) {
      const uintptr_t at = (lo + (last - lo) / (kSamples - 1) * i) / page * page;
      ok = Scan(fd, at, at + kSampleBytes, &out);
    }
  }
  ::close(fd);
  return ok ? std::optional<Present>(out) : std::nullopt;
}

Result<bool> FromSmaps(const void* p, size_t n) {
  std::ifstream smaps("/proc/self/smaps");
  if (!smaps) return Status::Io("cannot read /proc/self/smaps");
  const auto lo = reinterpret_cast<uintptr_t>(p);
  const uintptr_t hi = lo + n;
  uintptr_t covered = lo;  // [lo, covered) is known to be mapped
  bool huge = true, in = false;
  Vma v;
  auto close_vma = [&] {
    if (!in) return;
    huge = huge && Huge(v);
    if (v.start <= covered && v.end > covered) covered = v.end;
  };
  std::string line;
  while (std::getline(smaps, line)) {
    uintptr_t start = 0, end = 0;
    // A mapping's first line: "start-end perms offset dev inode [path]".
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " ", &start, &end) == 2 &&
        line.find(':') > line.find(' ')) {
      close_vma();
      v = Vma{.start = start, .end = end};
      in = start < hi && end > lo;
      continue;
    }
    if (!in) continue;
    uint64_t val = 0;
    if (Field(line, "Rss:", &val)) v.rss_kb = val;
    else if (Field(line, "AnonHugePages:", &val)) v.anon_huge_kb = val;
    else if (Field(line, "KernelPageSize:", &val)) v.kernel_page_kb = val;
    else if (Field(line, "THPeligible:", &val)) v.thp_eligible = val != 0;
  }
  close_vma();
  if (covered < hi) {
    char at[32];
    std::snprintf(at, sizeof at, "%#" PRIxPTR, covered);
    return Status::NotFound(std::string("memory at ") + at + " is not mapped");
  }
  return huge;
}

}  // namespace

Result<bool> BackedByHugePages(const void* p, size_t n) {
  const auto lo = reinterpret_cast<uintptr_t>(p);
  // msync answers ENOMEM when part of the range is not mapped (the scan
  // would skip the hole).
  const uintptr_t page = PageSize(), first = lo / page * page;
  if (::msync(reinterpret_cast<void*>(first), lo + n - first, MS_ASYNC) != 0 && errno == ENOMEM) {
    char at[32];
    std::snprintf(at, sizeof at, "%#" PRIxPTR, lo);
    return Status::NotFound(std::string("memory in [") + at + ", +" + std::to_string(n) +
                            ") is not mapped");
  }
  // Nothing resident yet: whether THP may back it is smaps' to say.
  if (std::optional<Present> present = ScanPresent(first, lo + n); present && present->bytes > 0)
    return present->huge * 4 >= present->bytes * 3;
  return FromSmaps(p, n);
}

}  // namespace cairn::os
