// os::BackedByHugePages against mappings whose pages the test chooses.
#include "os/mem/page_backing.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "os/mem/memory.hpp"

namespace cairn::os {
namespace {

constexpr size_t kHuge = 2u << 20;

// A 2 MiB-aligned anonymous mapping of `bytes`, advised as asked, touched.
class Region {
 public:
  // `advice` for the first `advised` bytes (all: 0), MADV_NOHUGEPAGE after.
  Region(size_t bytes, int advice, bool touch = true, size_t advised = 0) : bytes_(bytes) {
    raw_ = ::mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw_ == MAP_FAILED) return;
    const auto base = reinterpret_cast<uintptr_t>(raw_);
    data_ = static_cast<uint8_t*>(raw_) + (kHuge - base % kHuge) % kHuge;
    if (advised == 0) advised = bytes;
    (void)::madvise(data_, advised, advice);
    if (advised < bytes) (void)::madvise(data_ + advised, bytes - advised, MADV_NOHUGEPAGE);
    if (touch) std::memset(data_, 1, bytes);
  }
  ~Region() {
    if (raw_ != MAP_FAILED) ::munmap(raw_, bytes_ + kHuge);
  }
  uint8_t* data() const { return data_; }

 private:
  size_t bytes_;
  void* raw_ = MAP_FAILED;
  uint8_t* data_ = nullptr;
};

// THP as this kernel is set: "always [madvise] never" -> "madvise".
std::string ThpMode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(f, s);
  const size_t a = s.find('['), b = s.find(']');
  return a == std::string::npos || b == std::string::npos ? "" : s.substr(a + 1, b - a - 1);
}

TEST(PageBackingTest, SmallPagesAreNotHuge) {
  Region r(8 * kHuge, MADV_NOHUGEPAGE);
  ASSERT_NE(r.data(), nullptr);
  auto huge = BackedByHugePages(r.data(), 8 * kHuge);
  ASSERT_TRUE(huge.ok()) << huge.status().ToString();
  EXPECT_FALSE(*huge);
}

TEST(PageBackingTest, AdvisedTransparentHugePagesAreHuge) {
  // Both kernels CI meets (Debian's and this VM's) default to "madvise" or
  // "always"; "never" would make the advice a no-op.
  if (ThpMode() == "never") GTEST_SKIP() << "transparent huge pages are off (never)";
  Region r(8 * kHuge, MADV_HUGEPAGE);
  ASSERT_NE(r.data(), nullptr);
  auto huge = BackedByHugePages(r.data(), 8 * kHuge);
  ASSERT_TRUE(huge.ok()) << huge.status().ToString();
  EXPECT_TRUE(*huge) << "8 touched, advised, aligned 2 MiB pages";
  // A piece of it is asked about by the mapping it lies in.
  auto part = BackedByHugePages(r.data() + 4096, 4096);
  ASSERT_TRUE(part.ok());
  EXPECT_TRUE(*part);
}

TEST(PageBackingTest, AnAdvisedMappingWithNothingResidentIsHuge) {
  if (ThpMode() == "never") GTEST_SKIP() << "transparent huge pages are off (never)";
  Region r(8 * kHuge, MADV_HUGEPAGE, /*touch=*/false);
  ASSERT_NE(r.data(), nullptr);
  auto huge = BackedByHugePages(r.data(), 8 * kHuge);
  ASSERT_TRUE(huge.ok()) << huge.status().ToString();
  EXPECT_TRUE(*huge) << "THP may back it";
}

TEST(PageBackingTest, HugePagesSplitIntoSmallOnesAreSmall) {
  if (ThpMode() == "never") GTEST_SKIP() << "transparent huge pages are off (never)";
  Region r(8 * kHuge, MADV_HUGEPAGE);
  ASSERT_NE(r.data(), nullptr);
  // A protection change on one 4 KiB page of each splits its huge page.
  for (size_t h = 0; h < 8; ++h) {
    uint8_t* page = r.data() + h * kHuge + 4096;
    ASSERT_EQ(::mprotect(page, 4096, PROT_READ), 0);
    ASSERT_EQ(::mprotect(page, 4096, PROT_READ | PROT_WRITE), 0);
  }
  auto huge = BackedByHugePages(r.data(), 8 * kHuge);
  ASSERT_TRUE(huge.ok()) << huge.status().ToString();
  EXPECT_FALSE(*huge);
}

TEST(PageBackingTest, OnlyTheRangeAskedAboutCounts) {
  if (ThpMode() == "never") GTEST_SKIP() << "transparent huge pages are off (never)";
  Region r(8 * kHuge, MADV_HUGEPAGE, /*touch=*/true, /*advised=*/4 * kHuge);
  ASSERT_NE(r.data(), nullptr);
  auto first = BackedByHugePages(r.data(), 4 * kHuge);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(*first) << "the advised half";
  auto second = BackedByHugePages(r.data() + 4 * kHuge, 4 * kHuge);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(*second) << "the half in small pages";
  auto whole = BackedByHugePages(r.data(), 8 * kHuge);
  ASSERT_TRUE(whole.ok());
  EXPECT_FALSE(*whole) << "half of it in small pages";
}

// A range larger than the samples' span (64 x 2 MiB) is judged by them.
TEST(PageBackingTest, ALargeRangeInSmallPagesIsSmall) {
  Region r(160 * kHuge, MADV_NOHUGEPAGE);
  ASSERT_NE(r.data(), nullptr);
  auto huge = BackedByHugePages(r.data() + 5, 160 * kHuge - 5);
  ASSERT_TRUE(huge.ok()) << huge.status().ToString();
  EXPECT_FALSE(*huge);
}

TEST(PageBackingTest, AnUnmappedRangeIsNotFound) {
  const size_t page = PageSize();
  auto* p = static_cast<uint8_t*>(
      ::mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  ASSERT_EQ(::munmap(p + page, page), 0);  // a hole in the middle
  auto huge = BackedByHugePages(p, 3 * page);
  EXPECT_EQ(huge.status().code(), Code::kNotFound) << huge.status().ToString();
  auto first = BackedByHugePages(p, page);
  EXPECT_TRUE(first.ok()) << first.status().ToString();
  ::munmap(p, page);
  ::munmap(p + 2 * page, page);
}

}  // namespace
}  // namespace cairn::os
