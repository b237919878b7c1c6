#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "os/fs/fs.hpp"

namespace cairn::os {
namespace {

class PosixFsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "cairn_posix_fs_XXXXXX";
    ASSERT_NE(::mkdtemp(templ.data()), nullptr) << std::strerror(errno);
    dir_ = templ;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string Path(const std::string& name) const { return JoinPath(dir_, name); }

  FileSystem* fs_ = FileSystem::Default();
  std::string dir_;
};

TEST_F(PosixFsTest, DefaultIsASingleton) {
  EXPECT_NE(fs_, nullptr);
  EXPECT_EQ(fs_, FileSystem::Default());
}

TEST_F(PosixFsTest, WriteReadRoundTrip) {
  OpenOptions w;
  w.write = true;
  auto f = fs_->Open(Path("a"), w);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  std::string data(100000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + 1);
  ASSERT_TRUE((*f)->WriteAt(data.data(), data.size(), 0).ok());
  ASSERT_TRUE((*f)->WriteAt("xyz", 3, data.size()).ok());
  ASSERT_TRUE((*f)->Sync().ok());
  auto size = (*f)->Size();
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, data.size() + 3);
  // Writers can read back.
  char back[3];
  ASSERT_TRUE((*f)->ReadAt(back, 3, data.size()).ok());
  EXPECT_EQ(std::string(back, 3), "xyz");
  EXPECT_EQ((*f)->path(), Path("a"));
  EXPECT_FALSE((*f)->direct());
  ASSERT_TRUE((*f)->Close().ok());
  EXPECT_TRUE((*f)->Close().ok());  // idempotent
  EXPECT_EQ((*f)->Sync().code(), Code::kState);

  auto r = fs_->Open(Path("a"), OpenOptions{});
  ASSERT_TRUE(r.ok());
  std::string got(data.size(), '\0');
  ASSERT_TRUE((*r)->ReadAt(got.data(), got.size(), 0).ok());
  EXPECT_EQ(got, data);
}

TEST_F(PosixFsTest, ShortReadIsCorrupt) {
  OpenOptions w;
  w.write = true;
  auto f = fs_->Open(Path("short"), w);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->WriteAt("hello", 5, 0).ok());
  char buf[10];
  Status s = (*f)->ReadAt(buf, 10, 0);
  EXPECT_EQ(s.code(), Code::kCorrupt);
  EXPECT_NE(s.message().find("short read"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(Path("short")), std::string::npos) << s.message();
}

// A mapping hands out the file's bytes once read in; a range past the end
// is an error (the caller then reads with ReadAt, which names the short
// read), and so is mapping an empty file.
TEST_F(PosixFsTest, MapHandsOutTheFilesBytesInPlace) {
  OpenOptions w;
  w.write = true;
  auto f = fs_->Open(Path("m"), w);
  ASSERT_TRUE(f.ok());
  std::string data(3 * 4096 + 100, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 13 + 5);
  ASSERT_TRUE((*f)->WriteAt(data.data(), data.size(), 0).ok());
  auto r = fs_->Open(Path("m"), OpenOptions{});
  ASSERT_TRUE(r.ok());
  auto view = (*r)->Map();
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  // An unaligned range across pages, and the file's tail.
  auto mid = (*view)->Bytes(4000, 5000);
  ASSERT_TRUE(mid.ok()) << mid.status().ToString();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(*mid), 5000), data.substr(4000, 5000));
  auto tail = (*view)->Bytes(data.size() - 100, 100);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(*tail), 100), data.substr(data.size() - 100));
  EXPECT_FALSE((*view)->Bytes(data.size() - 99, 100).ok()) << "one byte past the end";
  EXPECT_FALSE((*view)->Bytes(data.size() + 4096, 1).ok());
  // The view outlives the file's descriptor.
  ASSERT_TRUE((*r)->Close().ok());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(*mid), 10), data.substr(4000, 10));
  EXPECT_EQ((*r)->Map().status().code(), Code::kState) << "closed";

  auto empty = fs_->Open(Path("empty"), w);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)->Map().status().code(), Code::kUnsupported);
}

// Whether each page of [first, first + count) of the file behind fd is in
// the page cache and read in (mincore), through a mapping of our own.
std::vector<bool> Resident(int fd, size_t size, size_t first, size_t count) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return {};
  std::vector<unsigned char> vec((size + page - 1) / page);
  const bool ok = ::mincore(p, size, vec.data()) == 0;
  ::munmap(p, size);
  std::vector<bool> in;
  for (size_t i = first; ok && i < first + count; ++i) in.push_back((vec[i] & 1) != 0);
  return in;
}

TEST_F(PosixFsTest, WillNeedReadsARangeInWithoutBeingAsked) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const std::string path = Path("w");
  std::string data(16 * page, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + 1);
  {
    auto f = fs_->Open(path, OpenOptions{.write = true});
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->WriteAt(data.data(), data.size(), 0).ok());
    ASSERT_TRUE((*f)->Sync().ok());
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);  // clean pages: dropped
  const std::vector<bool> before = Resident(fd, data.size(), 4, 8);
  if (before.empty() || std::count(before.begin(), before.end(), true) != 0) {
    ::close(fd);
    GTEST_SKIP() << "this file system keeps a clean file's pages (tmpfs) or has no mincore";
  }
  auto r = fs_->Open(path, OpenOptions{});
  ASSERT_TRUE(r.ok());
  auto view = (*r)->Map();
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  (*view)->WillNeed(4 * page + 10, 8 * page - 10);  // pages 4 .. 11, from inside page 4
  (*view)->WillNeed(data.size() - 10, 1 << 20);     // past the end: up to it
  (*view)->WillNeed(data.size() + page, 10);        // wholly past it: nothing
  // The reads it started complete on their own: a page counts once read
  // in. Nothing else here touches the file.
  std::vector<bool> after;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    after = Resident(fd, data.size(), 4, 8);
    if (std::count(after.begin(), after.end(), true) == 8) break;
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::yield();
  }
  ::close(fd);
  EXPECT_EQ(std::count(after.begin(), after.end(), true), 8) << "pages 4 .. 11 read in";
  auto bytes = (*view)->Bytes(0, data.size());
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(*bytes), data.size()), data);
}

TEST_F(PosixFsTest, OpenForWriteTruncatesAndUsesMode) {
  OpenOptions w;
  w.write = true;
  w.mode = 0640;
  mode_t old = ::umask(022);
  {
    auto f = fs_->Open(Path("m"), w);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->WriteAt("0123456789", 10, 0).ok());
  }
  auto f = fs_->Open(Path("m"), w);
  ::umask(old);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)->Size().value(), 0u);
  auto st = fs_->Stat(Path("m"));
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->mode, 0640u);
  EXPECT_FALSE(st->is_dir);
  EXPECT_GT(st->mtime_ns, 0);
  ASSERT_TRUE((*f)->Truncate(8192).ok());
  EXPECT_EQ((*f)->Size().value(), 8192u);
}

// In place: an existing file keeps its size and the bytes not written; an
// absent one is not created.
TEST_F(PosixFsTest, OpenInPlaceNeitherCreatesNorTruncates) {
  const OpenOptions in_place{.write = true, .in_place = true};
  EXPECT_EQ(fs_->Open(Path("absent"), in_place).status().code(), Code::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(Path("absent")));
  {
    auto f = fs_->Open(Path("p"), OpenOptions{.write = true});
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->WriteAt("0123456789", 10, 0).ok());
  }
  auto f = fs_->Open(Path("p"), in_place);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->Size().value(), 10u);
  ASSERT_TRUE((*f)->WriteAt("ab", 2, 4).ok());
  ASSERT_TRUE((*f)->Sync().ok());
  char back[11] = {0};
  ASSERT_TRUE((*f)->ReadAt(back, 10, 0).ok());
  EXPECT_STREQ(back, "0123ab6789");
}

TEST_F(PosixFsTest, DescriptorsAreCloseOnExec) {
  OpenOptions w;
  w.write = true;
  auto f = fs_->Open(Path("cloexec"), w);
  ASSERT_TRUE(f.ok());
  // Find our descriptor through /proc: the newest fd pointing at the file.
  bool found = false;
  for (int fd = 3; fd < 1024; ++fd) {
    char link[64], target[4096];
    std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = ::readlink(link, target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (std::string(target) == Path("cloexec")) {
      found = true;
      EXPECT_TRUE(::fcntl(fd, F_GETFD) & FD_CLOEXEC);
    }
  }
  if (!found) GTEST_SKIP() << "/proc/self/fd not available";
}

TEST_F(PosixFsTest, OpenMissingIsNotFound) {
  auto f = fs_->Open(Path("missing"), OpenOptions{});
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Code::kNotFound);
  EXPECT_NE(f.status().message().find("open " + Path("missing") + ": "), std::string::npos)
      << f.status().message();
}

TEST_F(PosixFsTest, DirectIo) {
  OpenOptions w;
  w.write = true;
  w.direct = true;
  auto f = fs_->Open(Path("direct"), w);
  if (!f.ok() && f.status().code() == Code::kUnsupported) {
    GTEST_SKIP() << "O_DIRECT unsupported here: " << f.status().message();
  }
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE((*f)->direct());
  void* buf = nullptr;
  ASSERT_EQ(::posix_memalign(&buf, kDirectIoAlignment, 2 * kDirectIoAlignment), 0);
  std::memset(buf, 0x5a, 2 * kDirectIoAlignment);
  Status s = (*f)->WriteAt(buf, 2 * kDirectIoAlignment, kDirectIoAlignment);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::memset(buf, 0, 2 * kDirectIoAlignment);
  ASSERT_TRUE((*f)->ReadAt(buf, kDirectIoAlignment, 2 * kDirectIoAlignment).ok());
  EXPECT_EQ(static_cast<unsigned char*>(buf)[100], 0x5a);
  EXPECT_EQ((*f)->Size().value(), 3 * kDirectIoAlignment);
  std::free(buf);
}

TEST_F(PosixFsTest, RenameReplacesAtomically) {
  OpenOptions w;
  w.write = true;
  {
    auto a = fs_->Open(Path("a"), w);
    ASSERT_TRUE((*a)->WriteAt("new", 3, 0).ok());
    auto b = fs_->Open(Path("b"), w);
    ASSERT_TRUE((*b)->WriteAt("old!", 4, 0).ok());
  }
  ASSERT_TRUE(fs_->Rename(Path("a"), Path("b")).ok());
  EXPECT_EQ(fs_->Stat(Path("a")).status().code(), Code::kNotFound);
  EXPECT_EQ(fs_->Stat(Path("b"))->size, 3u);
  Status s = fs_->Rename(Path("a"), Path("c"));
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find("rename"), std::string::npos);
}

TEST_F(PosixFsTest, RemoveFile) {
  OpenOptions w;
  w.write = true;
  ASSERT_TRUE(fs_->Open(Path("x"), w).ok());
  EXPECT_TRUE(fs_->Remove(Path("x")).ok());
  EXPECT_EQ(fs_->Remove(Path("x")).code(), Code::kNotFound);
}

TEST_F(PosixFsTest, CreateDirsIsMkdirP) {
  std::string deep = Path("a/b//c/");
  ASSERT_TRUE(fs_->CreateDirs(deep, 0700).ok());
  auto st = fs_->Stat(Path("a/b/c"));
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->is_dir);
  EXPECT_EQ(st->mode, 0700u);
  EXPECT_TRUE(fs_->CreateDirs(Path("a/b/c"), 0700).ok());  // exists: fine
  EXPECT_TRUE(fs_->SyncDir(Path("a/b")).ok());

  OpenOptions w;
  w.write = true;
  ASSERT_TRUE(fs_->Open(Path("a/file"), w).ok());
  Status s = fs_->CreateDirs(Path("a/file/sub"), 0700);
  EXPECT_EQ(s.code(), Code::kIo);
  EXPECT_NE(s.message().find("not a directory"), std::string::npos) << s.message();
  s = fs_->CreateDirs(Path("a/file"), 0700);
  EXPECT_EQ(s.code(), Code::kIo);
  EXPECT_NE(s.message().find("not a directory"), std::string::npos) << s.message();
  EXPECT_EQ(fs_->CreateDirs("", 0700).code(), Code::kInvalidArgument);
}

TEST_F(PosixFsTest, RemoveDirAndSyncDirErrors) {
  ASSERT_TRUE(fs_->CreateDirs(Path("d/e"), 0755).ok());
  EXPECT_FALSE(fs_->RemoveDir(Path("d")).ok());  // not empty
  EXPECT_TRUE(fs_->RemoveDir(Path("d/e")).ok());
  EXPECT_TRUE(fs_->RemoveDir(Path("d")).ok());
  EXPECT_EQ(fs_->RemoveDir(Path("d")).code(), Code::kNotFound);
  EXPECT_EQ(fs_->SyncDir(Path("d")).code(), Code::kNotFound);
}

TEST_F(PosixFsTest, ListSkipsDotsAndSorts) {
  OpenOptions w;
  w.write = true;
  ASSERT_TRUE(fs_->Open(Path("zeta"), w).ok());
  ASSERT_TRUE(fs_->Open(Path("alpha"), w).ok());
  ASSERT_TRUE(fs_->CreateDirs(Path("mid"), 0700).ok());
  auto list = fs_->List(dir_);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].name, "alpha");
  EXPECT_FALSE((*list)[0].is_dir);
  EXPECT_EQ((*list)[1].name, "mid");
  EXPECT_TRUE((*list)[1].is_dir);
  EXPECT_EQ((*list)[2].name, "zeta");
  EXPECT_EQ(fs_->List(Path("nope")).status().code(), Code::kNotFound);
  EXPECT_EQ(fs_->List(Path("zeta")).status().code(), Code::kIo);  // ENOTDIR
}

TEST(JoinPathTest, ExactlyOneSlash) {
  EXPECT_EQ(JoinPath("a", "b"), "a/b");
  EXPECT_EQ(JoinPath("a/", "b"), "a/b");
  EXPECT_EQ(JoinPath("a//", "/b"), "a/b");
  EXPECT_EQ(JoinPath("/", "b"), "/b");
  EXPECT_EQ(JoinPath("", "b"), "b");
  EXPECT_EQ(JoinPath("a", ""), "a");
  EXPECT_EQ(JoinPath("/x/y", "z/w"), "/x/y/z/w");
}

TEST(ErrnoStatusTest, MapsCodes) {
  EXPECT_EQ(ErrnoStatus(ENOSPC, "write", "/p").code(), Code::kNoSpace);
  EXPECT_EQ(ErrnoStatus(EDQUOT, "write", "/p").code(), Code::kNoSpace);
  EXPECT_EQ(ErrnoStatus(ENOENT, "open", "/p").code(), Code::kNotFound);
  EXPECT_EQ(ErrnoStatus(EEXIST, "mkdir", "/p").code(), Code::kExists);
  EXPECT_EQ(ErrnoStatus(ENOMEM, "mmap", "/p").code(), Code::kNoMemory);
  EXPECT_EQ(ErrnoStatus(EIO, "read", "/p").code(), Code::kIo);
  EXPECT_EQ(ErrnoStatus(EACCES, "open", "/p").code(), Code::kIo);
  EXPECT_EQ(ErrnoStatus(ENOSPC, "write", "/s/a.tmp").message(),
            std::string("write /s/a.tmp: ") + std::strerror(ENOSPC));
}

}  // namespace
}  // namespace cairn::os
