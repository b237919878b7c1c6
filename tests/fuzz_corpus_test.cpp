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

// Every seed of fuzz/corpus/<target>/ (at least `min` of them) is an input
// that `input` accepts: OK.
void ExpectSeedsOk(const std::string& target, size_t min, Status (*input)(const uint8_t*, size_t)) {
  const auto seeds = ReadDir("fuzz/corpus/" + target);
  ASSERT_GE(seeds.size(), min) << target;
  for (const Input& s : seeds) {
    const Status st = input(s.bytes.data(), s.bytes.size());
    EXPECT_TRUE(st.ok()) << target << "/" << s.name << ": " << st.ToString();
  }
}

TEST(FuzzCorpus, FileReaderSeedsAreValidFiles) {
  // Fewer: regenerate them with cairn_fuzz_seeds (fuzz/make_seeds.cpp).
  ExpectSeedsOk("file_reader", 4, fuzz::ReadFileInput);
}

TEST(FuzzCorpus, ConfigSeedsLoad) { ExpectSeedsOk("config", 4, fuzz::LoadConfigInput); }

// The drop-in APIs' seeds are the peers' own configuration files (VELOC's
// test/heatdis.in, FTI's tutorial and example files, their placeholders
// filled in): each must parse, as it does for the peer.
TEST(FuzzCorpus, VelocConfigSeedsParse) { ExpectSeedsOk("veloc_config", 2, fuzz::ParseVelocConfigInput); }

TEST(FuzzCorpus, FtiConfigSeedsParse) { ExpectSeedsOk("fti_config", 5, fuzz::ParseFtiConfigInput); }

// Manifests the library wrote (version 2) and a version 1 text file
// (regenerate with cairn_fuzz_seeds fuzz/corpus/manifest manifest).
TEST(FuzzCorpus, ManifestSeedsParse) { ExpectSeedsOk("manifest", 3, fuzz::ParseManifestInput); }

// A head of each kind (cairn_fuzz_seeds fuzz/corpus/partner_head partner_head).
TEST(FuzzCorpus, PartnerHeadSeedsParse) {
  ExpectSeedsOk("partner_head", 3, fuzz::ParsePartnerHeadInput);
}

// A chunk, two answers and an abort notice (cairn_fuzz_seeds
// fuzz/corpus/partner_messages partner_messages).
TEST(FuzzCorpus, PartnerMessagesSeedsParse) {
  ExpectSeedsOk("partner_messages", 4, fuzz::ParsePartnerMessagesInput);
}

// Parity files of sets of 2, 3 and 4, one Reed-Solomon (cairn_fuzz_seeds
// fuzz/corpus/parity_header parity_header).
TEST(FuzzCorpus, ParityHeaderSeedsParse) {
  ExpectSeedsOk("parity_header", 4, fuzz::ParseParityHeaderInput);
}

// fuzz/corpus/bundle: a version of one file, a chain of three with an empty
// layer, cut into pieces of different sizes (regenerate with cairn_fuzz_seeds
// fuzz/corpus/bundle bundle).
TEST(FuzzCorpus, BundleSeedsParse) { ExpectSeedsOk("bundle", 3, fuzz::ParseBundleInput); }

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
