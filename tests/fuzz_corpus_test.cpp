// The fuzz targets' inputs in the ordinary test suite (docs/design.md,
// "Fuzzing"): every seed of fuzz/corpus/ is still a valid input (a file that
// verifies, a config that loads), and every finding committed under
// tests/data/fuzz/<target>/ (the input libFuzzer wrote when it crashed) now
// fails with a clean error. The inputs go through the same functions as in
// bin/fuzz_* (fuzz/inputs.hpp), so a finding reproduces here, and under ASan
// and UBSan in CI, without a fuzz build.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/inputs.hpp"
#include "testing/test_paths.hpp"

namespace cairn {
namespace {

namespace fs = std::filesystem;

struct Input {
  std::string name;
  std::vector<uint8_t> bytes;
};

// Every file of `dir` (relative to the source tree; none if it does not
// exist: a target without findings has no folder), sorted by name.
std::vector<Input> ReadDir(const std::string& dir) {
  std::vector<Input> out;
  const fs::path path = fs::path(test::kSourceDir) / dir;
  if (!fs::exists(path)) return out;
  for (const auto& e : fs::directory_iterator(path)) {
    std::ifstream in(e.path(), std::ios::binary);
    out.push_back({e.path().filename().string(),
                   std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {})});
  }
  std::sort(out.begin(), out.end(), [](const Input& a, const Input& b) { return a.name < b.name; });
  return out;
}

TEST(FuzzCorpus, FileReaderSeedsAreValidFiles) {
  const auto seeds = ReadDir("fuzz/corpus/file_reader");
  ASSERT_GE(seeds.size(), 4u) << "regenerate with cairn_fuzz_seeds (fuzz/make_seeds.cpp)";
  for (const Input& s : seeds) {
    const Status st = fuzz::ReadFileInput(s.bytes.data(), s.bytes.size());
    EXPECT_TRUE(st.ok()) << s.name << ": " << st.ToString();
  }
}

TEST(FuzzCorpus, ConfigSeedsLoad) {
  const auto seeds = ReadDir("fuzz/corpus/config");
  ASSERT_GE(seeds.size(), 4u);
  for (const Input& s : seeds) {
    const Status st = fuzz::LoadConfigInput(s.bytes.data(), s.bytes.size());
    EXPECT_TRUE(st.ok()) << s.name << ": " << st.ToString();
  }
}

// The drop-in APIs' seeds are the peers' own configuration files (VELOC's
// test/heatdis.in, FTI's tutorial and example files, their placeholders
// filled in): each must parse, as it does for the peer.
TEST(FuzzCorpus, VelocConfigSeedsParse) {
  const auto seeds = ReadDir("fuzz/corpus/veloc_config");
  ASSERT_GE(seeds.size(), 2u);
  for (const Input& s : seeds) {
    const Status st = fuzz::ParseVelocConfigInput(s.bytes.data(), s.bytes.size());
    EXPECT_TRUE(st.ok()) << s.name << ": " << st.ToString();
  }
}

TEST(FuzzCorpus, FtiConfigSeedsParse) {
  const auto seeds = ReadDir("fuzz/corpus/fti_config");
  ASSERT_GE(seeds.size(), 5u);
  for (const Input& s : seeds) {
    const Status st = fuzz::ParseFtiConfigInput(s.bytes.data(), s.bytes.size());
    EXPECT_TRUE(st.ok()) << s.name << ": " << st.ToString();
  }
}

TEST(FuzzFindings, FileReaderFindingsAreCleanErrors) {
  for (const Input& f : ReadDir("tests/data/fuzz/file_reader")) {
    const Status st = fuzz::ReadFileInput(f.bytes.data(), f.bytes.size());
    EXPECT_FALSE(st.ok()) << f.name;
    EXPECT_FALSE(st.message().empty()) << f.name;
  }
}

TEST(FuzzFindings, ConfigFindingsAreConfigErrors) {
  for (const Input& f : ReadDir("tests/data/fuzz/config")) {
    const Status st = fuzz::LoadConfigInput(f.bytes.data(), f.bytes.size());
    EXPECT_EQ(st.code(), Code::kConfig) << f.name << ": " << st.ToString();
    EXPECT_NE(st.message().find("fuzz.toml"), std::string::npos) << f.name << ": " << st.ToString();
  }
}

}  // namespace
}  // namespace cairn
