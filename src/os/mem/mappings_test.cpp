// os::Map / Unmap (the one table of cairn_alloc's mappings) and
// os::RestoreHugePages: huge pages split by a partial protection change come
// back whole, only for huge mappings that Map made.
#include "os/mem/mappings.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include <gtest/gtest.h>

#include "os/mem/memory.hpp"
#include "os/mem/page_backing.hpp"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

namespace cairn::os {
namespace {

constexpr size_t kSpans = 4;
constexpr size_t kBytes = kSpans * kHugePageBytes;

// kBytes of 2 MiB-aligned anonymous memory, advised for huge pages (from
// Map when `mapped`, else mmap + madvise outside its table) and touched.
class Memory {
 public:
  explicit Memory(bool mapped) : mapped_(mapped) {
    if (mapped) {
      auto p = Map(kBytes);
      if (!p.ok()) return;
      data_ = static_cast<uint8_t*>(*p);
    } else {
      raw_ = ::mmap(nullptr, kBytes + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (raw_ == MAP_FAILED) return;
      const auto base = reinterpret_cast<uintptr_t>(raw_);
      data_ = static_cast<uint8_t*>(raw_) + (kHugePageBytes - base % kHugePageBytes) % kHugePageBytes;
      (void)::madvise(data_, kBytes, MADV_HUGEPAGE);
    }
    for (size_t i = 0; i < kBytes; ++i) data_[i] = static_cast<uint8_t>(i * 7);
  }
  ~Memory() {
    if (mapped_ && data_ != nullptr) {
      EXPECT_TRUE(Unmap(data_).ok());
    }
    if (raw_ != MAP_FAILED) ::munmap(raw_, kBytes + kHugePageBytes);
  }
  uint8_t* data() const { return data_; }
  bool Huge() const {
    auto r = BackedByHugePages(data_, kBytes);
    return r.ok() && *r;
  }
  // Splits every span's mapping: a protection change on one 4 KiB page of
  // it, undone (as a zero-copy epoch's release of one page does).
  void Split() {
    for (size_t s = 0; s < kSpans; ++s) {
      uint8_t* page = data_ + s * kHugePageBytes + 4096;
      ASSERT_EQ(::mprotect(page, 4096, PROT_READ), 0);
      ASSERT_EQ(::mprotect(page, 4096, PROT_READ | PROT_WRITE), 0);
    }
  }
  bool Intact() const {
    for (size_t i = 0; i < kBytes; ++i) {
      if (data_[i] != static_cast<uint8_t>(i * 7)) return false;
    }
    return true;
  }

 private:
  bool mapped_;
  void* raw_ = MAP_FAILED;
  uint8_t* data_ = nullptr;
};

// Why huge pages cannot be tested here ("" when they can).
std::string Unavailable(const Memory& m) {
  if (m.data() == nullptr) return "mmap failed";
  if (!m.Huge()) return "transparent huge pages are not available (THP off, or no free huge page)";
  if (::madvise(m.data(), kHugePageBytes, MADV_COLLAPSE) != 0 && errno == EINVAL) {
    return "this kernel has no MADV_COLLAPSE (Linux < 6.1)";
  }
  return "";
}

const auto kNever = [] { return false; };

TEST(HugePagesTest, RestorePutsSplitHugePagesBackWholeWithTheSameBytes) {
  Memory m(/*mapped=*/true);
  if (const std::string why = Unavailable(m); !why.empty()) GTEST_SKIP() << why;
  m.Split();
  ASSERT_FALSE(m.Huge()) << "a 4 KiB protection change did not split the huge pages here";
  EXPECT_EQ(RestoreHugePages(m.data(), kBytes, kNever), kBytes);
  EXPECT_TRUE(m.Huge());
  EXPECT_TRUE(m.Intact());
}

TEST(HugePagesTest, MemoryNotAdvisedThroughCairnIsLeftAsItIs) {
  Memory m(/*mapped=*/false);
  if (const std::string why = Unavailable(m); !why.empty()) GTEST_SKIP() << why;
  m.Split();
  EXPECT_EQ(RestoreHugePages(m.data(), kBytes, kNever), 0u);
  EXPECT_FALSE(m.Huge());
}

TEST(HugePagesTest, StopEndsThePass) {
  Memory m(/*mapped=*/true);
  if (const std::string why = Unavailable(m); !why.empty()) GTEST_SKIP() << why;
  m.Split();
  int spans = 0;
  EXPECT_EQ(RestoreHugePages(m.data(), kBytes, [&] { return ++spans > 1; }), kHugePageBytes);
  EXPECT_FALSE(m.Huge());
  EXPECT_TRUE(m.Intact());
}

// Unmap takes the mapping out of the table: memory mapped again at the same
// address by someone else is not collapsed.
TEST(HugePagesTest, UnmappedMemoryLeavesTheTable) {
  void* again = MAP_FAILED;
  for (int tries = 0; tries < 5 && again == MAP_FAILED; ++tries) {  // another thread may take the address
    auto p = Map(kBytes);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    ASSERT_TRUE(Unmap(*p).ok());
    again = ::mmap(*p, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (again != MAP_FAILED && again != *p) {  // a kernel that ignores the flag
      ::munmap(again, kBytes);
      again = MAP_FAILED;
    }
  }
  ASSERT_NE(again, MAP_FAILED) << "could not map the freed address again";
  auto* data = static_cast<uint8_t*>(again);
  (void)::madvise(data, kBytes, MADV_HUGEPAGE);
  std::memset(data, 1, kBytes);
  ASSERT_EQ(::mprotect(data + 4096, 4096, PROT_READ), 0);  // splits the first span
  ASSERT_EQ(::mprotect(data + 4096, 4096, PROT_READ | PROT_WRITE), 0);
  EXPECT_EQ(RestoreHugePages(data, kBytes, kNever), 0u);
  // Only meaningful where the kernel would have collapsed it.
  const bool collapsible = ::madvise(data, kHugePageBytes, MADV_COLLAPSE) == 0;
  ::munmap(again, kBytes);
  if (!collapsible) GTEST_SKIP() << "MADV_COLLAPSE does not work here (THP off, or Linux < 6.1)";
}

TEST(MappingsTest, MapAlignsAndUnmapRefusesWhatItDidNotMap) {
  auto small = Map(100);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*small) % PageSize(), 0u);
  auto big = Map(kHugePageBytes + 1);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*big) % kHugePageBytes, 0u);
  static_cast<uint8_t*>(*big)[2 * kHugePageBytes - 1] = 1;  // rounded up to whole huge pages
  int local = 0;
  EXPECT_EQ(Unmap(&local).code(), Code::kInvalidArgument);
  EXPECT_TRUE(Unmap(*small).ok());
  EXPECT_EQ(Unmap(*small).code(), Code::kInvalidArgument);  // twice
  EXPECT_TRUE(Unmap(*big).ok());
}

}  // namespace
}  // namespace cairn::os
