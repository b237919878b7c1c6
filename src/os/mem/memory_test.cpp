#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "os/mem/memory.hpp"

namespace cairn::os {
namespace {

TEST(MemoryTest, PageSizeIsAPowerOfTwo) {
  size_t p = PageSize();
  EXPECT_GE(p, 4096u);
  EXPECT_EQ(p & (p - 1), 0u);
}

TEST(MemoryTest, CreateRoundsUpAndZeroFills) {
  auto m = Mapping::Create(PageSize() + 1, MapOptions{});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->size(), 2 * PageSize());
  ASSERT_NE(m->data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m->data()) % PageSize(), 0u);
  for (size_t i = 0; i < m->size(); i += 97) ASSERT_EQ(m->data()[i], 0) << i;
  std::memset(m->data(), 0xab, m->size());  // writable
  EXPECT_EQ(m->data()[m->size() - 1], 0xab);
}

TEST(MemoryTest, ZeroBytesIsInvalid) {
  auto m = Mapping::Create(0, MapOptions{});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Code::kInvalidArgument);
}

TEST(MemoryTest, PopulateAndHugePages) {
  for (bool populate : {false, true}) {
    for (bool huge : {false, true}) {
      MapOptions o;
      o.populate = populate;
      o.huge_pages = huge;
      auto m = Mapping::Create(4 << 20, o);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      EXPECT_EQ(m->data()[(4 << 20) - 1], 0);
      m->data()[12345] = 7;
      EXPECT_EQ(m->data()[12345], 7);
    }
  }
}

TEST(MemoryTest, HugeMappingFailureExplainsLimits) {
  // 2^62 bytes exceeds any x86-64/arm64 user address space: mmap says ENOMEM.
  auto m = Mapping::Create(size_t{1} << 62, MapOptions{});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Code::kNoMemory);
  const std::string msg = m.status().message();
  EXPECT_NE(msg.find("vm.max_map_count"), std::string::npos) << msg;
  EXPECT_NE(msg.find("vm.overcommit_memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(size_t{1} << 62)), std::string::npos) << msg;
  EXPECT_EQ(Mapping::Create(SIZE_MAX, MapOptions{}).status().code(), Code::kNoMemory);
}

TEST(MemoryTest, MoveTransfersOwnership) {
  auto r = Mapping::Create(PageSize(), MapOptions{});
  ASSERT_TRUE(r.ok());
  Mapping a = std::move(r).value();
  uint8_t* p = a.data();
  a.data()[0] = 42;
  Mapping b(std::move(a));
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.data()[0], 42);
  Mapping c;
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(b.data(), nullptr);  // NOLINT(bugprone-use-after-move)
  c = Mapping();                 // unmaps
  EXPECT_EQ(c.data(), nullptr);
  EXPECT_EQ(c.Lock().code(), Code::kState);
}

TEST(MemoryTest, LockAndUnlockOnePage) {
  auto m = Mapping::Create(PageSize(), MapOptions{});
  ASSERT_TRUE(m.ok());
  Status s = m->Lock();
  if (!s.ok()) GTEST_SKIP() << "cannot lock even one page here: " << s.ToString();
  EXPECT_TRUE(m->locked());
  EXPECT_TRUE(m->Lock().ok());  // idempotent
  EXPECT_TRUE(m->Unlock().ok());
  EXPECT_FALSE(m->locked());
}

// In a child process (so the parent's limits and capabilities are untouched):
// drop CAP_IPC_LOCK (root would otherwise bypass the limit), set
// RLIMIT_MEMLOCK to one page, and lock 64 pages. The child sends the Status
// message through a pipe; exit code 0 = failed as expected, 2 = mlock
// succeeded anyway, 3 = setup failed.
TEST(MemoryTest, LockFailureNamesRlimitMemlock) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct caps[2] = {};
    if (::syscall(SYS_capget, &hdr, caps) == 0) {
      caps[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
      (void)::syscall(SYS_capset, &hdr, caps);
    }
    struct rlimit rl;
    if (::getrlimit(RLIMIT_MEMLOCK, &rl) != 0) ::_exit(3);
    rl.rlim_cur = PageSize();
    if (::setrlimit(RLIMIT_MEMLOCK, &rl) != 0) ::_exit(3);
    auto m = Mapping::Create(64 * PageSize(), MapOptions{});
    if (!m.ok()) ::_exit(3);
    Status s = m->Lock();
    if (s.ok()) ::_exit(2);
    std::string out = std::to_string(static_cast<int>(s.code())) + "|" + s.message();
    ssize_t w = ::write(fds[1], out.data(), out.size());
    ::_exit(w == static_cast<ssize_t>(out.size()) ? 0 : 3);
  }
  ::close(fds[1]);
  std::string got;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof(buf))) > 0) got.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFEXITED(wstatus));
  if (WEXITSTATUS(wstatus) == 2) GTEST_SKIP() << "mlock ignores RLIMIT_MEMLOCK here";
  ASSERT_EQ(WEXITSTATUS(wstatus), 0) << "child setup failed";
  EXPECT_EQ(got.substr(0, got.find('|')), std::to_string(static_cast<int>(Code::kNoMemory)));
  EXPECT_NE(got.find("RLIMIT_MEMLOCK is " + std::to_string(PageSize()) + " bytes"), std::string::npos)
      << got;
  EXPECT_NE(got.find("(soft)"), std::string::npos) << got;
  EXPECT_NE(got.find("(hard)"), std::string::npos) << got;
  EXPECT_NE(got.find("ulimit -l"), std::string::npos) << got;
  EXPECT_NE(got.find("mlock of " + std::to_string(64 * PageSize()) + " bytes"), std::string::npos)
      << got;
}

// Both ways of touching: TouchPages (madvise(MADV_POPULATE_WRITE) on this
// kernel, if it is >= 5.14) and its fallback.
struct Toucher {
  const char* name;
  void (*touch)(void*, size_t);
};
const Toucher kTouchers[] = {{"TouchPages", TouchPages}, {"TouchPagesOneByOne", TouchPagesOneByOne}};

size_t ResidentPages(const Mapping& m, size_t first_page, size_t pages) {
  std::vector<unsigned char> vec(pages);
  EXPECT_EQ(::mincore(m.data() + first_page * PageSize(), pages * PageSize(), vec.data()), 0);
  size_t n = 0;
  for (unsigned char v : vec) n += v & 1;
  return n;
}

TEST(MemoryTest, TouchPagesPreservesContent) {
  for (const Toucher& t : kTouchers) {
    SCOPED_TRACE(t.name);
    // Pages 0-3 written, 4-7 never: a partly written chunk.
    auto m = Mapping::Create(8 * PageSize(), MapOptions{});
    ASSERT_TRUE(m.ok());
    const size_t written = 4 * PageSize() - 100;
    for (size_t i = 0; i < written; ++i) m->data()[i] = static_cast<uint8_t>(i * 31 + 3);
    t.touch(m->data() + 1, m->size() - 1);  // unaligned start
    for (size_t i = 0; i < m->size(); ++i) {
      ASSERT_EQ(m->data()[i], i < written ? static_cast<uint8_t>(i * 31 + 3) : 0) << i;
    }
    t.touch(m->data(), 0);  // no-op
  }
}

TEST(MemoryTest, TouchPagesMakesPagesResident) {
  for (const Toucher& t : kTouchers) {
    SCOPED_TRACE(t.name);
    const size_t pages = 16;
    auto m = Mapping::Create(pages * PageSize(), MapOptions{});
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(ResidentPages(*m, 0, pages), 0u);
    // Pages 2..5 only: a range that starts and ends inside pages.
    t.touch(m->data() + 2 * PageSize() + 7, 3 * PageSize());
    EXPECT_EQ(ResidentPages(*m, 0, 2), 0u);
    EXPECT_EQ(ResidentPages(*m, 2, 4), 4u);
    EXPECT_EQ(ResidentPages(*m, 6, pages - 6), 0u);
    t.touch(m->data(), m->size());
    EXPECT_EQ(ResidentPages(*m, 0, pages), pages);
  }
}

}  // namespace
}  // namespace cairn::os
