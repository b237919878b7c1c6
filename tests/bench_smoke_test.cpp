// Smoke test of cairn-bench: tiny runs of each workload must succeed (exit 0,
// restored data verified) and write the documented JSON keys; usage errors
// must exit 2. Sizes are kept small so each case takes about a second.
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

extern char** environ;

namespace {

const std::string kBench = std::string(CAIRN_BIN_DIR) + "/cairn-bench";

class BenchSmokeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(kBench.c_str(), X_OK) != 0) GTEST_SKIP() << kBench << " not built";
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") +
                       "/cairn-bench-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // Runs cairn-bench with `args`; returns its exit code (-1 if it did not
  // exit normally). Its stdout+stderr go to log_, shown on failure.
  int Run(const std::vector<std::string>& args) {
    std::vector<std::string> all = {kBench};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    const std::string log_path = dir_ + "/bench.log";
    posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid = 0;
    const int err = posix_spawn(&pid, kBench.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (err != 0) return -1;
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid) return -1;
    log_ = ReadFile(log_path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  static std::string ReadFile(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  // The document is pretty-printed with two spaces per level, so a member
  // `key` of a top-level object reads "\n    \"key\": " and a top-level
  // member "\n  \"key\": ". Checks "a.b" (or "a") exists and is not null.
  static void ExpectPath(const std::string& json, const std::string& path) {
    const size_t dot = path.find('.');
    const std::string top = path.substr(0, dot);
    const size_t at = json.find("\n  \"" + top + "\": ");
    ASSERT_NE(at, std::string::npos) << "missing " << top;
    if (dot == std::string::npos) {
      EXPECT_NE(json.compare(at + top.size() + 7, 4, "null"), 0) << path << " is null";
      return;
    }
    const std::string leaf = "\n    \"" + path.substr(dot + 1) + "\": ";
    const size_t end = json.find("\n  }", at);  // the top-level object's end
    const size_t k = json.find(leaf, at);
    ASSERT_TRUE(k != std::string::npos && k < end) << "missing " << path;
    EXPECT_NE(json.compare(k + leaf.size(), 4, "null"), 0) << path << " is null";
  }

  std::string dir_;
  std::string log_;
};

TEST_F(BenchSmokeTest, UniformBothModes) {
  const std::string json = dir_ + "/out.json";
  ASSERT_EQ(Run({"uniform", "--count", "4", "--size", "1MiB", "--interval-ms", "1",
                 "--host-cache", "8MiB", "--mode", "both", "--json", json, "--dir",
                 dir_ + "/work"}),
            0)
      << log_;
  const std::string doc = ReadFile(json);
  for (const char* p :
       {"limits.memcpy_gbps", "limits.write_gbps", "limits.read_gbps", "init.open_s",
        "forward.blocking_s", "forward.capture_gbps", "flush.gbps", "backward.blocking_s",
        "backward.cache_hit_ratio", "total_blocking_s", "ratios.capture_to_memcpy",
        "ratios.flush_to_buffered_write", "ratios.sync_to_async_total_blocking"}) {
    ExpectPath(doc, p);
  }
  // May be null where the file system refuses O_DIRECT, but must be there.
  EXPECT_NE(doc.find("\"direct_write_gbps\": "), std::string::npos);
  EXPECT_NE(doc.find("\"flush_to_direct_write\": "), std::string::npos);
  EXPECT_NE(doc.find("\n  \"async\": {"), std::string::npos);
  EXPECT_NE(doc.find("\n  \"sync\": {"), std::string::npos);
  EXPECT_NE(doc.find("\"status\": \"ok\""), std::string::npos);
  EXPECT_EQ(doc.find("\"mismatches\": 1"), std::string::npos);
}

TEST_F(BenchSmokeTest, Restart) {
  const std::string json = dir_ + "/out.json";
  ASSERT_EQ(Run({"restart", "--size", "8MiB", "--count", "2", "--interval-ms", "1",
                 "--host-cache", "32MiB", "--json", json, "--dir", dir_ + "/work"}),
            0)
      << log_;
  const std::string doc = ReadFile(json);
  for (const char* p : {"limits.memcpy_gbps", "restart.checkpoint_blocking_s",
                        "restart.checkpoint_blocking_max_s", "restart.wait_s",
                        "restart.latest_s", "restart.restore_s", "total_blocking_s"}) {
    ExpectPath(doc, p);
  }
  EXPECT_NE(doc.find("\"latest_version\": 1"), std::string::npos);
}

TEST_F(BenchSmokeTest, UsageErrorsExitTwo) {
  EXPECT_EQ(Run({"--no-such-option"}), 2) << log_;
  EXPECT_EQ(Run({"uniform", "--size", "12XB"}), 2) << log_;
  EXPECT_EQ(Run({"uniform", "--mode", "fast"}), 2) << log_;
  EXPECT_EQ(Run({"trace"}), 2) << log_;
  EXPECT_EQ(Run({"uniform", "--count"}), 2) << log_;
  EXPECT_EQ(Run({"--help"}), 0) << log_;
}

}  // namespace
