// Smoke test of cairn-bench: tiny runs of each workload must succeed (exit 0,
// restored data verified) and write the documented JSON keys; usage errors
// must exit 2. Sizes are kept small so each case takes about a second.
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "testing/test_paths.hpp"

extern char** environ;

namespace {

const std::string kBench = std::string(cairn::test::kBinDir) + "/cairn-bench";

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

  // Runs cairn-bench with `args` (and `env`, "NAME=value" entries added to
  // this process's environment, replacing the same names); returns its exit
  // code (-1 if it did not exit normally). Its stdout+stderr go to log_,
  // shown on failure.
  int Run(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    std::vector<std::string> env_all = env;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string var = *e;
      bool replaced = false;
      for (const std::string& x : env) {
        replaced = replaced || var.compare(0, x.find('=') + 1, x, 0, x.find('=') + 1) == 0;
      }
      if (!replaced) env_all.push_back(var);
    }
    std::vector<char*> envp;
    for (std::string& e : env_all) envp.push_back(e.data());
    envp.push_back(nullptr);
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
    const int err = posix_spawn(&pid, kBench.c_str(), &fa, nullptr, argv.data(), envp.data());
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

  // The document is pretty-printed with two spaces per level, so member `k`
  // of an object at depth d reads "\n" + 2(d+1) spaces + "\"k\": " and the
  // object ends at "\n" + 2d spaces + "}". The text of the value at "a.b.c"
  // (each segment inside the previous object) up to the end of its line, no
  // trailing comma; "" when absent.
  static std::string ValueAt(const std::string& json, const std::string& path) {
    size_t at = 0, end = json.size(), from = 0;
    for (int depth = 0;; ++depth) {
      const size_t dot = path.find('.', from);
      const std::string seg = path.substr(from, dot == std::string::npos ? dot : dot - from);
      const std::string key = "\n" + std::string(2 * (depth + 1), ' ') + "\"" + seg + "\": ";
      at = json.find(key, at);
      if (at == std::string::npos || at >= end) return "";
      at += key.size();
      if (dot == std::string::npos) {
        std::string v = json.substr(at, json.find('\n', at) - at);
        if (!v.empty() && v.back() == ',') v.pop_back();
        return v;
      }
      end = std::min(end, json.find("\n" + std::string(2 * (depth + 1), ' ') + "}", at));
      from = dot + 1;
    }
  }
  // Checks that `path` exists and is not null.
  static void ExpectPath(const std::string& json, const std::string& path) {
    const std::string v = ValueAt(json, path);
    EXPECT_NE(v, "") << "missing " << path;
    EXPECT_NE(v, "null") << path << " is null";
  }

  // The unsigned integer member `key` of the top-level object `top`
  // ("\n  \"top\": {" ... "\n    \"key\": N"); -1 when absent or not a number.
  static long long TopMember(const std::string& json, const std::string& top,
                             const std::string& key) {
    const size_t at = json.find("\n  \"" + top + "\": {");
    if (at == std::string::npos) return -1;
    const size_t end = json.find("\n  }", at);
    const std::string leaf = "\n    \"" + key + "\": ";
    const size_t k = json.find(leaf, at);
    if (k == std::string::npos || k > end) return -1;
    const char* p = json.c_str() + k + leaf.size();
    if (*p < '0' || *p > '9') return -1;
    return std::strtoll(p, nullptr, 10);
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
        "ratios.flush_to_buffered_write", "ratios.sync_to_async_total_blocking",
        // the capture-like memcpy limit and the single-thread ones
        "limits.memcpy_threads", "limits.memcpy_huge_pages", "limits.memcpy_single_thread_gbps",
        "limits.memcpy_single_thread_4k_gbps", "forward.capture_with_waits_gbps",
        "ratios.capture_with_waits_to_memcpy",
        // both baseline variants: scratch data without fsync by default
        "sync.total_blocking_s", "sync_other.total_blocking_s",
        "ratios.sync_other_to_async_total_blocking", "params.sync_fsync_is_default"}) {
    ExpectPath(doc, p);
  }
  EXPECT_EQ(ValueAt(doc, "params.sync_fsync"), "false");  // scratch data: no fsync
  EXPECT_EQ(TopMember(doc, "sync", "n_trials"), 1);
  EXPECT_EQ(TopMember(doc, "sync_other", "n_trials"), 1);
  EXPECT_EQ(ValueAt(doc, "sync.fsync"), "false");
  EXPECT_EQ(ValueAt(doc, "sync_other.fsync"), "true");
  // May be null where the file system refuses O_DIRECT, but must be there.
  EXPECT_NE(doc.find("\"direct_write_gbps\": "), std::string::npos);
  EXPECT_NE(doc.find("\"flush_to_direct_write\": "), std::string::npos);
  EXPECT_NE(doc.find("\n  \"async\": {"), std::string::npos);
  EXPECT_NE(doc.find("\n  \"sync\": {"), std::string::npos);
  EXPECT_NE(doc.find("\"status\": \"ok\""), std::string::npos);
  EXPECT_EQ(doc.find("\"mismatches\": 1"), std::string::npos);
}

// The restart, with the new-process restart of both libraries from dropped
// page caches and a persistent tier.
TEST_F(BenchSmokeTest, Restart) {
  const std::string json = dir_ + "/out.json";
  ASSERT_EQ(Run({"restart", "--size", "8MiB", "--count", "2", "--interval-ms", "1",
                 "--host-cache", "32MiB", "--json", json, "--dir", dir_ + "/work",
                 "--persistent", dir_ + "/persistent"}),
            0)
      << log_;
  const std::string doc = ReadFile(json);
  for (const char* p :
       {"limits.memcpy_gbps", "restart.checkpoint_blocking_s", "restart.checkpoint_blocking_max_s",
        "restart.wait_s", "restart.latest_s", "restart.restore_s", "total_blocking_s",
        "limits.cold_read_gbps",
        "async.restart.cold_restore_s", "sync.restart.cold_restore_s",
        "sync_other.restart.cold_restore_s", "async.restart.cold_open_s",
        "async.restart.cold_latest_s", "async.restart.cold_restore_call_s",
        "async.restart.cold_process_s", "async.restart.cold_cache_drop",
        "async.restart.cold_resident_bytes", "async.restart.persistent_durable_s",
        "sync.restart.persistent_durable_s", "ratios.sync_to_async_cold_restore",
        "params.persistent_dir"}) {
    ExpectPath(doc, p);
  }
  EXPECT_NE(doc.find("\"latest_version\": 1"), std::string::npos);
  // Each new process found and verified the newest version.
  for (const char* mode : {"async", "sync", "sync_other"}) {
    EXPECT_EQ(ValueAt(doc, std::string(mode) + ".restart.cold_version"), "1") << mode;
    const std::string drop = ValueAt(doc, std::string(mode) + ".restart.cold_cache_drop");
    EXPECT_TRUE(drop == "\"fadvise\"" || drop == "\"drop_caches\"") << drop;
  }
  EXPECT_EQ(ValueAt(doc, "sync.fsync"), "true");  // checkpoints: fsync
  EXPECT_EQ(ValueAt(doc, "sync_other.fsync"), "false");
  EXPECT_NE(doc.find("\"status\": \"ok\""), std::string::npos);
  EXPECT_EQ(doc.find("\"mismatches\": 1"), std::string::npos);
  // The bench's own files are gone from the persistent directory it was given.
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/persistent/cairn"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/persistent/sync"));
}

// --whole-restart: Cairn's new process into a buffer it has not touched
// (large enough for the restore to fault it in ahead of the reads) and the
// raw programs, each verified or failing the run.
TEST_F(BenchSmokeTest, WholeRestart) {
  const std::string json = dir_ + "/out.json";
  ASSERT_EQ(
      Run({"restart",      "--mode",      "async",           "--no-warmup", "--repeat",      "2",
           "--size",       "32MiB",       "--count",         "2",           "--interval-ms", "1",
           "--host-cache", "64MiB",       "--whole-restart", "on",          "--json",        json,
           "--dir",        dir_ + "/work"}),
      0)
      << log_;
  const std::string doc = ReadFile(json);
  for (const char* p : {"async.restart.whole_restart_s", "async.restart.whole_raw_s",
                        "async.restart.whole_to_raw", "async.restart.cold_restore_call_s"}) {
    ExpectPath(doc, p);
  }
  const std::string how = ValueAt(doc, "async.restart.whole_raw_method");
  EXPECT_TRUE(how == "\"direct\"" || how == "\"buffered\"") << how;
  EXPECT_EQ(ValueAt(doc, "async.restart.cold_version"), "1");
  EXPECT_EQ(doc.find("\"mismatches\": 1"), std::string::npos);
}

// The raw program says what is missing instead of timing nothing.
TEST_F(BenchSmokeTest, RawRestartChildWithoutAFileFails) {
  const std::string report = dir_ + "/report.txt";
  EXPECT_EQ(
      Run({"restart-child", "--child-lib", "raw-direct", "--child-salt", "1", "--child-version",
           "0", "--child-dir", dir_ + "/nothing-here", "--child-report", report, "--size", "2MiB"}),
      1)
      << log_;
  EXPECT_NE(ReadFile(report).find("error not found: raw restart: no data file under"),
            std::string::npos)
      << ReadFile(report);
}

// The new process's verification catches wrong data: restart-child on the
// files a sync trial left, with the trial's salt (the first trial of the
// process: 1) and with another.
TEST_F(BenchSmokeTest, RestartChildVerifies) {
  ASSERT_EQ(Run({"restart", "--mode", "sync", "--sync-other", "off", "--no-warmup",
                 "--cold-restart", "off", "--size", "2MiB", "--count", "2", "--interval-ms", "1",
                 "--dir", dir_ + "/work", "--keep-files"}),
            0)
      << log_;
  const std::string report = dir_ + "/report.txt";
  auto child = [&](const char* salt, const char* version) {
    return Run({"restart-child", "--child-lib", "sync", "--child-salt", salt, "--child-version",
                version, "--child-dir", dir_ + "/work/sync", "--child-report", report, "--size",
                "2MiB"});
  };
  EXPECT_EQ(child("1", "1"), 0) << log_;
  EXPECT_NE(ReadFile(report).find("\nversion 1\n"), std::string::npos) << ReadFile(report);
  EXPECT_EQ(child("2", "1"), 1) << log_;  // another trial's content
  EXPECT_NE(ReadFile(report).find("\nwrong "), std::string::npos) << ReadFile(report);
  EXPECT_EQ(child("1", "0"), 1) << log_;  // Latest must find the newest version
  EXPECT_NE(ReadFile(report).find("\nwrong "), std::string::npos) << ReadFile(report);
}

// Changed data: a pages run at 5% writes about the changed bytes,
// far below what a full run (the baseline in the same run) writes. --settle
// makes every version layered on the previous one whatever the disk's speed,
// so nothing here depends on timing.
TEST_F(BenchSmokeTest, RestartChangesPages) {
  const std::string json = dir_ + "/out.json";
  ASSERT_EQ(Run({"restart", "--changes", "pages", "--change-fraction", "0.05", "--size", "8MiB",
                 "--count", "4", "--interval-ms", "1", "--host-cache", "32MiB", "--settle", "on",
                 "--sync-other", "off", "--track-loop-intervals", "2", "--json", json, "--dir",
                 dir_ + "/work"}),
            0)
      << log_;
  const std::string doc = ReadFile(json);
  for (const char* p :
       {"restart.checkpoint_blocking_s", "changes.bytes_changed", "changes.bytes_written",
        "changes.payload_bytes", "changes.metadata_bytes", "changes.written_to_changed",
        "changes.tip_depth", "changes.mode", "async.changes.bytes_written",
        "sync.changes.bytes_written", "tracking.overhead", "tracking.tracked_s",
        "tracking.untracked_s", "ratios.changes_written_to_changed", "params.change_fraction"}) {
    ExpectPath(doc, p);
  }
  EXPECT_EQ(ValueAt(doc, "changes.mode"), "\"pages\"");
  EXPECT_EQ(ValueAt(doc, "params.tracked_memory"), "true");
  EXPECT_EQ(ValueAt(doc, "changes.tip_depth"), "3");  // v0 full, v1..v3 layered
  EXPECT_EQ(ValueAt(doc, "changes.layered_versions"), "3");
  const double changed = std::stod(ValueAt(doc, "changes.bytes_changed"));
  const double written = std::stod(ValueAt(doc, "changes.bytes_written"));
  const double full = std::stod(ValueAt(doc, "sync.changes.bytes_written"));
  EXPECT_EQ(full, 4.0 * (8 << 20));
  // 8 MiB + 3 x ceil(5% of 2048 pages) x 4 KiB changed.
  EXPECT_EQ(changed, (8 << 20) + 3.0 * 103 * 4096);
  EXPECT_LT(written, 0.4 * full);
  EXPECT_GE(written, changed);
  // A page tracker stores exactly the pages written (a fallback to hashing
  // would store whole 64 KiB chunks).
  if (ValueAt(doc, "changes.tracker") != "\"\"") {
    EXPECT_EQ(ValueAt(doc, "changes.payload_bytes"), ValueAt(doc, "changes.bytes_changed"));
  }
  EXPECT_EQ(doc.find("\"mismatches\": 1"), std::string::npos);
  EXPECT_NE(doc.find("\"status\": \"ok\""), std::string::npos);
}

// With a fraction < 1 each page must hold the version that changed it last:
// restart-child on the files a pages trial left passes for the newest
// version and fails when told to expect the version before it (most pages
// are the same, the ones version 2 changed are not) or another pattern.
TEST_F(BenchSmokeTest, RestartChangesVerifyCatchesWrongVersion) {
  const std::vector<std::string> changes = {"--changes", "pages", "--change-fraction", "0.05",
                                            "--size", "2MiB"};
  std::vector<std::string> args = {"restart", "--mode", "async", "--no-warmup", "--cold-restart",
                                   "off", "--track-loop", "off", "--settle", "on", "--count", "3",
                                   "--interval-ms", "1", "--host-cache", "16MiB", "--dir",
                                   dir_ + "/work", "--keep-files"};
  args.insert(args.end(), changes.begin(), changes.end());
  ASSERT_EQ(Run(args), 0) << log_;
  const std::string report = dir_ + "/report.txt";
  auto child = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = {"restart-child", "--child-lib", "cairn", "--child-salt", "1",
                                  "--child-version", "2", "--child-dir", dir_ + "/work/cairn",
                                  "--child-report", report, "--host-cache", "16MiB"};
    a.insert(a.end(), changes.begin(), changes.end());
    a.insert(a.end(), extra.begin(), extra.end());
    return Run(a);
  };
  EXPECT_EQ(child({}), 0) << log_ << ReadFile(report);
  EXPECT_NE(ReadFile(report).find("\nversion 2\n"), std::string::npos) << ReadFile(report);
  EXPECT_EQ(child({"--child-verify-as", "1"}), 1) << log_;
  EXPECT_NE(ReadFile(report).find("\nwrong version 1: stamp of page"), std::string::npos)
      << ReadFile(report);
  EXPECT_EQ(child({"--change-pattern", "strided"}), 1) << log_;
  EXPECT_NE(ReadFile(report).find("\nwrong "), std::string::npos) << ReadFile(report);
}

// --- GPU tier (--memory device|managed) against the fake CUDA driver -------
// (testing/fake_cuda; CAIRN_HAVE_FAKE_CUDA is defined when it is built).

// The whole GPU path: Cairn protects/pushes device memory, captures into the
// device cache and drains it to the host cache; the baseline copies
// device->host itself. Needs the GPU pipeline in the core.
TEST_F(BenchSmokeTest, UniformDeviceMemoryWithDeviceCache) {
#ifndef CAIRN_HAVE_FAKE_CUDA
  GTEST_SKIP() << "the fake CUDA driver is not built (no cuda.h)";
#else
  const std::string json = dir_ + "/out.json";
  ASSERT_EQ(Run({"uniform", "--memory", "device", "--device-cache", "8MiB", "--count", "4",
                 "--size", "1MiB", "--interval-ms", "1", "--host-cache", "8MiB", "--mode", "both",
                 "--json", json, "--dir", dir_ + "/work"},
                {std::string("CAIRN_CUDA_DRIVER=") + cairn::test::kFakeCudaLib}),
            0)
      << log_;
  const std::string doc = ReadFile(json);
  EXPECT_NE(doc.find("\"memory\": \"device\""), std::string::npos);
  EXPECT_NE(doc.find("\"device_cache_bytes\": 8388608"), std::string::npos);
  EXPECT_NE(doc.find("\"device_cache_init\": \"incremental\""), std::string::npos);
  for (const char* p : {"limits.htod_gbps", "limits.dtoh_gbps", "limits.dtod_gbps",
                        "device.capture_gbps", "device.drain_gbps", "device.capacity_bytes",
                        "device.mapped_bytes", "device.hits", "device.capture_blocked_s"}) {
    ExpectPath(doc, p);
  }
  EXPECT_NE(doc.find("\n    \"gpu\": true"), std::string::npos);
  EXPECT_EQ(TopMember(doc, "device", "capacity_bytes"), 8ll << 20);
  EXPECT_GT(TopMember(doc, "device", "drain_bytes"), 0);
  EXPECT_GT(TopMember(doc, "device", "capture_bytes"), 0);
  EXPECT_NE(doc.find("\"status\": \"ok\""), std::string::npos);
  EXPECT_EQ(doc.find("\"mismatches\": 1"), std::string::npos);
#endif
}

// The bench's own device path (allocation, upload, download, the baseline's
// staging copies, device limits) without Cairn: passes without the pipeline.
TEST_F(BenchSmokeTest, SyncBaselineOnDeviceAndManagedMemory) {
#ifndef CAIRN_HAVE_FAKE_CUDA
  GTEST_SKIP() << "the fake CUDA driver is not built (no cuda.h)";
#else
  const std::vector<std::string> env = {std::string("CAIRN_CUDA_DRIVER=") + cairn::test::kFakeCudaLib};
  for (const char* memory : {"device", "managed"}) {
    const std::string json = dir_ + "/" + memory + ".json";
    ASSERT_EQ(Run({"uniform", "--memory", memory, "--mode", "sync", "--count", "3", "--size",
                   "1MiB", "--interval-ms", "1", "--verify", "full", "--json", json, "--dir",
                   dir_ + "/work"},
                  env),
              0)
        << memory << "\n" << log_;
    const std::string doc = ReadFile(json);
    EXPECT_NE(doc.find(std::string("\"memory\": \"") + memory + "\""), std::string::npos);
    ExpectPath(doc, "limits.dtoh_gbps");
    EXPECT_EQ(doc.find("\"mismatches\": 1"), std::string::npos);
    ASSERT_EQ(Run({"restart", "--memory", memory, "--mode", "sync", "--count", "2", "--size",
                   "2MiB", "--interval-ms", "1", "--dir", dir_ + "/work"},
                  env),
              0)
        << memory << "\n" << log_;
  }
#endif
}

TEST_F(BenchSmokeTest, DeviceMemoryWithoutDriverExitsTwo) {
  EXPECT_EQ(Run({"uniform", "--memory", "device", "--count", "1", "--size", "1MiB", "--dir",
                 dir_ + "/work"},
                {"CAIRN_CUDA_DRIVER=" + dir_ + "/no-such-libcuda.so"}),
            2)
      << log_;
  EXPECT_NE(log_.find("--memory device needs a CUDA driver: "), std::string::npos) << log_;
}

// --set KEY=VALUE reaches the trials' config (and the restart child's), and
// is in the JSON's params as given.
TEST_F(BenchSmokeTest, SetGivesAConfigKeyWithoutAnOption) {
  const std::string json = dir_ + "/out.json";
  ASSERT_EQ(Run({"restart", "--changes", "hash", "--change-fraction", "0.1", "--size", "4MiB",
                 "--count", "2", "--interval-ms", "1", "--host-cache", "16MiB", "--sync-other", "off",
                 "--set", "checkpoint.hash_chunk=8KiB", "--set", "host_cache.grow=false", "--json", json,
                 "--dir", dir_ + "/work"}),
            0)
      << log_;
  const std::string doc = ReadFile(json);
  EXPECT_EQ(ValueAt(doc, "params.hash_chunk_bytes"), "8192");
  EXPECT_NE(doc.find("\"checkpoint.hash_chunk=8KiB\""), std::string::npos) << doc.substr(0, 2000);
}

TEST_F(BenchSmokeTest, UsageErrorsExitTwo) {
  EXPECT_EQ(Run({"uniform", "--set", "host_cache.size=1GiB"}), 2) << log_;  // has --host-cache
  EXPECT_NE(log_.find("--host-cache"), std::string::npos) << log_;
  EXPECT_EQ(Run({"uniform", "--set", "host_cache.nope=1"}), 2) << log_;
  EXPECT_NE(log_.find("nope"), std::string::npos) << log_;
  EXPECT_EQ(Run({"uniform", "--set", "host_cache.grow=maybe"}), 2) << log_;
  EXPECT_EQ(Run({"uniform", "--set", "grow"}), 2) << log_;
  EXPECT_EQ(Run({"uniform", "--memory", "gpu"}), 2) << log_;
  EXPECT_EQ(Run({"uniform", "--device-cache-init", "eager"}), 2) << log_;
  EXPECT_EQ(Run({"uniform", "--device-map-chunk", "0"}), 2) << log_;
  EXPECT_EQ(Run({"--no-such-option"}), 2) << log_;
  EXPECT_EQ(Run({"uniform", "--size", "12XB"}), 2) << log_;
  EXPECT_EQ(Run({"uniform", "--mode", "fast"}), 2) << log_;
  EXPECT_EQ(Run({"trace"}), 2) << log_;
  EXPECT_EQ(Run({"uniform", "--count"}), 2) << log_;
  EXPECT_EQ(Run({"uniform", "--sync-fsync", "maybe"}), 2) << log_;
  EXPECT_EQ(Run({"uniform", "--persistent", dir_ + "/p"}), 2) << log_;  // restart only
  EXPECT_EQ(Run({"restart-child", "--size", "1MiB"}), 2) << log_;     // needs its --child-*
  EXPECT_EQ(Run({"restart", "--change-fraction", "0"}), 2) << log_;
  EXPECT_EQ(Run({"restart", "--change-fraction", "1.5"}), 2) << log_;
  EXPECT_EQ(Run({"restart", "--change-fraction", "table1"}), 2) << log_;
  EXPECT_EQ(Run({"restart", "--changes", "dirty"}), 2) << log_;
  EXPECT_EQ(Run({"restart", "--change-pattern", "zigzag"}), 2) << log_;
  EXPECT_EQ(Run({"uniform", "--changes", "pages"}), 2) << log_;  // restart only
  EXPECT_EQ(Run({"--help"}), 0) << log_;
  EXPECT_EQ(Run({"--quiet=yes"}), 2) << log_;                   // a flag takes no value
  EXPECT_EQ(Run({"restart", "--child-salt", "1"}), 2) << log_;  // hidden, restart-child's
}

// The usage and docs/bench.md's options table come from one table: every
// option the usage lists is in the document's table, and the table is what
// --help-markdown prints from the same rows.
TEST_F(BenchSmokeTest, OptionsTableInDocsIsCurrent) {
  ASSERT_EQ(Run({"--help-markdown"}), 0) << log_;
  const std::string table = log_;
  const std::string doc = ReadFile(std::string(cairn::test::kSourceDir) + "/docs/bench.md");
  EXPECT_NE(doc.find(table), std::string::npos)
      << "docs/bench.md's options table is not cairn-bench --help-markdown; paste this:\n"
      << table;
  ASSERT_EQ(Run({"--help"}), 0) << log_;
  for (size_t at = log_.find("\n  --"); at != std::string::npos; at = log_.find("\n  --", at + 1)) {
    const std::string name = log_.substr(at + 3, log_.find_first_of(" \n", at + 3) - at - 3);
    EXPECT_NE(table.find("| `" + name), std::string::npos) << name << " is not in the table";
  }
}

}  // namespace
