#include "os/mem/prefault.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "os/mem/memory.hpp"

namespace cairn::os {
namespace {

// An anonymous mapping nobody has touched yet, unmapped at the end.
struct FreshMapping {
  explicit FreshMapping(size_t n, int prot = PROT_READ | PROT_WRITE) : bytes(n) {
    void* p = ::mmap(nullptr, n, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
    // No transparent huge page: one would make every sample resident at once.
    if (data != nullptr) (void)::madvise(data, n, MADV_NOHUGEPAGE);
  }
  ~FreshMapping() {
    if (data != nullptr) ::munmap(data, bytes);
  }
  uint8_t* data = nullptr;
  size_t bytes;
};

bool KernelPopulates() {
  FreshMapping m(PageSize());
  return m.data != nullptr && PopulatePages(m.data, PageSize(), true) != EINVAL;
}

TEST(PrefaultTest, SampledPagesResidentSeesUntouchedAndTouchedMemory) {
  FreshMapping m(8u << 20);
  ASSERT_NE(m.data, nullptr);
  EXPECT_FALSE(SampledPagesResident(m.data, m.bytes));
  std::memset(m.data, 1, m.bytes / 2);
  EXPECT_FALSE(SampledPagesResident(m.data, m.bytes)) << "the second half is untouched";
  EXPECT_TRUE(SampledPagesResident(m.data, m.bytes / 2));
}

TEST(PrefaultTest, FaultsEveryRangeInAndKeepsWhatIsThere) {
  if (!KernelPopulates()) GTEST_SKIP() << "no MADV_POPULATE_WRITE (Linux < 5.14)";
  // Two ranges, one not a multiple of the step; the first half-written.
  FreshMapping a(Prefaulter::kStep * 2 + PageSize()), b(Prefaulter::kStep / 2);
  ASSERT_NE(a.data, nullptr);
  ASSERT_NE(b.data, nullptr);
  std::memset(a.data, 0x5a, a.bytes / 2);
  Prefaulter p({{a.data, a.bytes}, {b.data, b.bytes}});
  p.Join();
  EXPECT_EQ(p.done(), a.bytes + b.bytes);
  EXPECT_TRUE(SampledPagesResident(a.data, a.bytes));
  EXPECT_TRUE(SampledPagesResident(b.data, b.bytes));
  for (size_t i = 0; i < a.bytes; i += 997) {
    ASSERT_EQ(a.data[i], i < a.bytes / 2 ? 0x5a : 0) << "byte " << i;
  }
}

TEST(PrefaultTest, StopsAtARangeTheKernelRefuses) {
  if (!KernelPopulates()) GTEST_SKIP() << "no MADV_POPULATE_WRITE (Linux < 5.14)";
  FreshMapping ro(Prefaulter::kStep, PROT_READ), rw(Prefaulter::kStep);
  ASSERT_NE(ro.data, nullptr);
  ASSERT_NE(rw.data, nullptr);
  Prefaulter p({{ro.data, ro.bytes}, {rw.data, rw.bytes}});
  p.Join();
  EXPECT_EQ(p.done(), 0u);
  EXPECT_FALSE(SampledPagesResident(rw.data, rw.bytes));
  // A refused range does not turn the advice off for the next caller.
  EXPECT_EQ(PopulatePages(rw.data, rw.bytes, true), 0);
}

TEST(PrefaultTest, DestroyingItEarlyStopsTheHelper) {
  FreshMapping m(Prefaulter::kStep * 8);
  ASSERT_NE(m.data, nullptr);
  { Prefaulter p({{m.data, m.bytes}}); }  // must return and join, done or not
  std::memset(m.data, 1, m.bytes);        // still mapped, still writable
  EXPECT_EQ(m.data[m.bytes - 1], 1);
}

}  // namespace
}  // namespace cairn::os
