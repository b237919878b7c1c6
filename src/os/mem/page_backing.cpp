// BackedByHugePages (page_backing.hpp): one pass over /proc/self/smaps.
#include "os/mem/page_backing.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "os/mem/memory.hpp"

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

}  // namespace

Result<bool> BackedByHugePages(const void* p, size_t n) {
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

}  // namespace cairn::os
