// os::RestoreHugePages: huge pages split by a partial protection change come
// back whole, only for memory advised through AdviseHugePages.
#include "os/huge_pages.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include <gtest/gtest.h>

#include "os/page_backing.hpp"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

namespace cairn::os {
namespace {

constexpr size_t kSpans = 4;
constexpr size_t kBytes = kSpans * kHugePageBytes;

// kBytes of 2 MiB-aligned anonymous memory, advised for huge pages (through
// AdviseHugePages when `remembered`, else by madvise alone) and touched.
class Memory {
 public:
  explicit Memory(bool remembered) {
    raw_ = ::mmap(nullptr, kBytes + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw_ == MAP_FAILED) return;
    const auto base = reinterpret_cast<uintptr_t>(raw_);
    data_ = static_cast<uint8_t*>(raw_) + (kHugePageBytes - base % kHugePageBytes) % kHugePageBytes;
    if (remembered) {
      AdviseHugePages(data_, kBytes);
    } else {
      (void)::madvise(data_, kBytes, MADV_HUGEPAGE);
    }
    for (size_t i = 0; i < kBytes; ++i) data_[i] = static_cast<uint8_t>(i * 7);
  }
  ~Memory() {
    ForgetHugePages(data_);
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
  Memory m(/*remembered=*/true);
  if (const std::string why = Unavailable(m); !why.empty()) GTEST_SKIP() << why;
  m.Split();
  ASSERT_FALSE(m.Huge()) << "a 4 KiB protection change did not split the huge pages here";
  EXPECT_EQ(RestoreHugePages(m.data(), kBytes, kNever), kBytes);
  EXPECT_TRUE(m.Huge());
  EXPECT_TRUE(m.Intact());
}

TEST(HugePagesTest, MemoryNotAdvisedThroughCairnIsLeftAsItIs) {
  Memory m(/*remembered=*/false);
  if (const std::string why = Unavailable(m); !why.empty()) GTEST_SKIP() << why;
  m.Split();
  EXPECT_EQ(RestoreHugePages(m.data(), kBytes, kNever), 0u);
  EXPECT_FALSE(m.Huge());
}

TEST(HugePagesTest, StopEndsThePassAndForgottenMemoryIsLeft) {
  Memory m(/*remembered=*/true);
  if (const std::string why = Unavailable(m); !why.empty()) GTEST_SKIP() << why;
  m.Split();
  int spans = 0;
  EXPECT_EQ(RestoreHugePages(m.data(), kBytes, [&] { return ++spans > 1; }), kHugePageBytes);
  EXPECT_FALSE(m.Huge());
  ForgetHugePages(m.data());
  EXPECT_EQ(RestoreHugePages(m.data(), kBytes, kNever), 0u);
  EXPECT_TRUE(m.Intact());
}

}  // namespace
}  // namespace cairn::os
