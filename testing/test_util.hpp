// Helpers shared by the tests in tests/: Status assertions, a temporary
// directory, deterministic data patterns, byte comparison, directory listings,
// polling and a fixture that opens clients on a scratch directory.
//
// Everything is in namespace cairn::test (not cairn::testing, which would hide
// GoogleTest's ::testing inside namespace cairn).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cairn/cairn.hpp"

// Status checks that print the Status on failure.
#define ASSERT_OK(expr)                                     \
  do {                                                      \
    const ::cairn::Status s_ = (expr);                      \
    ASSERT_TRUE(s_.ok()) << #expr << ": " << s_.ToString(); \
  } while (0)
#define EXPECT_OK(expr)                                     \
  do {                                                      \
    const ::cairn::Status s_ = (expr);                      \
    EXPECT_TRUE(s_.ok()) << #expr << ": " << s_.ToString(); \
  } while (0)

namespace cairn::test {

inline constexpr uint64_t kKiB = 1024;
inline constexpr uint64_t kMiB = 1024 * 1024;

// A fresh directory ::testing::TempDir() + "cairn_<stem>_XXXXXX", removed with
// everything in it on destruction. path() is empty if it could not be made.
class TempDir {
 public:
  explicit TempDir(const std::string& stem);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The whole file at `path` (through the default file system); empty when it
// cannot be read.
std::vector<uint8_t> Slurp(const std::string& path);

// Deterministic bytes from a seed, mixed SplitMix64-style; `salt` selects the
// stream, so that tests keep their own data.
void FillSplitMix(void* p, size_t n, uint64_t seed, uint64_t salt);
std::vector<uint8_t> SplitMixPattern(size_t n, uint64_t seed, uint64_t salt);

// Deterministic bytes from a 64-bit LCG started at seed * 0x9E3779B97F4A7C15
// + salt; each byte is the top byte of the next state.
void FillLcg(uint8_t* p, size_t n, uint64_t seed, uint64_t salt);
std::vector<uint8_t> LcgPattern(size_t n, uint64_t seed, uint64_t salt);

// got == want, or where they first differ (sizes, byte index and values).
::testing::AssertionResult SameBytes(const std::vector<uint8_t>& got,
                                     const std::vector<uint8_t>& want);
// The first want.size() bytes at got equal want, or the first byte that does not.
::testing::AssertionResult SameBytes(const uint8_t* got, const std::vector<uint8_t>& want);

// Sorted file names in dir (empty if the directory does not exist), without
// the placement records beside checkpoint files (docs/format.md 5; tests of
// their own list them with AllFiles).
std::vector<std::string> Files(const std::string& dir);
std::vector<std::string> AllFiles(const std::string& dir);

// "[a, b, c]".
std::string Join(const std::vector<std::string>& v);

// The file name of checkpoint version v: "v%020lld.cairn".
std::string VersionFileName(int64_t v);

// Calls pred every `interval` until it is true (returns true) or `limit` has
// passed (returns false).
template <typename Pred>
bool PollUntil(Pred pred, std::chrono::milliseconds limit = std::chrono::milliseconds(5000),
               std::chrono::milliseconds interval = std::chrono::milliseconds(2)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(interval);
  }
  return true;
}

// DefaultConfig() with scratch_dir = root + "/scratch" and the given cache and
// block sizes.
Config ScratchConfig(const std::string& root, uint64_t cache, uint64_t block);

// A fixture with a temporary directory (TempDir(stem)); SetUp fails if it
// could not be made.
class ScratchDirTest : public ::testing::Test {
 protected:
  explicit ScratchDirTest(const std::string& stem) : tmp_(stem) {}

  void SetUp() override { ASSERT_FALSE(tmp_.path().empty()) << "mkdtemp failed"; }

  // ScratchConfig in this test's directory.
  Config MakeConfig(uint64_t cache = 1 * kMiB, uint64_t block = 64 * kKiB) const {
    return ScratchConfig(tmp_.path(), cache, block);
  }

  // Client::Open(c); on failure a non-fatal failure and nullptr.
  std::unique_ptr<Client> OpenClient(const Config& c);

  TempDir tmp_;
};

}  // namespace cairn::test
