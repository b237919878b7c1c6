#include "testing/test_util.hpp"

#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <utility>

#include "os/fs/fs.hpp"

namespace cairn::test {

namespace fs = std::filesystem;

TempDir::TempDir(const std::string& stem) {
  std::string t = ::testing::TempDir() + "cairn_" + stem + "_XXXXXX";
  if (::mkdtemp(t.data()) != nullptr) path_ = t;
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) fs::remove_all(path_, ec);
}

std::vector<uint8_t> Slurp(const std::string& path) {
  std::vector<uint8_t> bytes;
  auto file = os::FileSystem::Default()->Open(path, os::OpenOptions{});
  if (!file.ok()) return bytes;
  auto size = (*file)->Size();
  if (!size.ok()) return bytes;
  bytes.resize(*size);
  if (!(*file)->ReadAt(bytes.data(), bytes.size(), 0).ok()) bytes.clear();
  return bytes;
}

void FillSplitMix(void* p, size_t n, uint64_t seed, uint64_t salt) {
  auto* b = static_cast<uint8_t*>(p);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + salt;
  for (size_t i = 0; i < n; ++i) {
    if (i % 8 == 0) {
      x += 0x9E3779B97F4A7C15ull;
      uint64_t z = x;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      x ^= z >> 31;
    }
    b[i] = static_cast<uint8_t>(x >> (8 * (i % 8)));
  }
}

std::vector<uint8_t> SplitMixPattern(size_t n, uint64_t seed, uint64_t salt) {
  std::vector<uint8_t> v(n);
  FillSplitMix(v.data(), n, seed, salt);
  return v;
}

void FillLcg(uint8_t* p, size_t n, uint64_t seed, uint64_t salt) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + salt;
  for (size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = static_cast<uint8_t>(x >> 56);
  }
}

std::vector<uint8_t> LcgPattern(size_t n, uint64_t seed, uint64_t salt) {
  std::vector<uint8_t> v(n);
  FillLcg(v.data(), n, seed, salt);
  return v;
}

::testing::AssertionResult SameBytes(const std::vector<uint8_t>& got,
                                     const std::vector<uint8_t>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      return ::testing::AssertionFailure()
             << "first difference at byte " << i << " of " << got.size() << ": got " << int(got[i])
             << ", want " << int(want[i]);
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult SameBytes(const uint8_t* got, const std::vector<uint8_t>& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) {
      return ::testing::AssertionFailure()
             << "first difference at byte " << i << " of " << want.size();
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<std::string> AllFiles(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    out.push_back(it->path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out = AllFiles(dir);
  std::erase_if(out, [](const std::string& f) { return f.ends_with(".placement"); });
  return out;
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return "[" + s + "]";
}

std::string VersionFileName(int64_t v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "v%020lld.cairn", static_cast<long long>(v));
  return buf;
}

Config ScratchConfig(const std::string& root, uint64_t cache, uint64_t block) {
  Config c = DefaultConfig();
  c.scratch_dir = root + "/scratch";
  c.host_cache_bytes = cache;
  // The size a test chooses is the size under test (a cache smaller than
  // the regions is how most tests make captures wait); growth has its own.
  c.host_cache_grow = false;
  c.block_bytes = block;
  return c;
}

std::unique_ptr<Client> ScratchDirTest::OpenClient(const Config& c) {
  auto r = Client::Open(c);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

}  // namespace cairn::test
