// Crash consistency: a child process checkpoints in a loop and is SIGKILLed
// at a random moment. Afterwards no version the child saw committed may be
// lost, every file with a final name must verify, and Latest() must restore
// exactly the content of its version.
//
// SIGKILL keeps the page cache, so this test cannot tell synced from unsynced
// data; power_loss_test.cpp does that. What it adds is real processes, real
// files and kills at any instruction. Every other trial waits for the child's
// first commit before its kill delay starts (a gate, not a sleep), so that at
// least those trials test the loss of committed versions; the test fails if
// fewer than kMinTrialsWithCommits trials saw a commit.
//
// The layered variant (checkpoint.changes = pages, max_layers 3) changes an
// eighth of the pages per version, so most versions are layers of a chain and
// the kills land in layered flushes: no chain may break. The zero-copy
// variant (checkpoint.capture = zero-copy) kills during protected epochs.
//
// The seed of the kill delays is printed; CAIRN_CRASH_SEED=<n> replays a run.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cairn/cairn.hpp"
#include "format/file_reader.hpp"
#include "format/naming.hpp"
#include "os/fs/fs.hpp"
#include "testing/test_util.hpp"

namespace cairn {
namespace {

namespace fs = std::filesystem;
using namespace test;

constexpr size_t kBufferBytes = 3 * kMiB;
constexpr int kTrials = 20;
constexpr int kCommitEvery = 2;
constexpr int kMinTrialsWithCommits = kTrials / 2;  // the gated trials
const char* const kName = "sim";

// Exit codes of the child when it fails on its own (it is normally killed).
enum ChildExit {
  kChildOpenFailed = 20,
  kChildProtectFailed,
  kChildCheckpointFailed,
  kChildWaitFailed,
  kChildPipeFailed,
  kChildRanOut,
  kChildNotZeroCopy  // zero-copy mode copied instead (the test would not test it)
};

uint64_t Word(int64_t version, size_t i) {
  uint64_t x = (static_cast<uint64_t>(version) << 32) ^ (i * 0x9E3779B97F4A7C15ull);
  return x ^ (x >> 29);
}

constexpr size_t kWordsPerPage = 4096 / sizeof(uint64_t);
constexpr int64_t kSpread = 8;  // layered: a page changes every kSpread versions

// The version whose pattern word i holds at `version`: the version itself
// (full), or the last one at or before it that changed i's page (layered:
// page p changes at the versions v with (p + v) % kSpread == 0; 0 = the
// initial fill).
int64_t Writer(int64_t version, size_t i, bool layered) {
  if (!layered) return version;
  const auto page = static_cast<int64_t>(i / kWordsPerPage);
  return std::max<int64_t>(0, version - (page + version) % kSpread);
}

// The words of `version` (a full fill, or only the pages it changes).
// Relaxed atomic stores (plain moves): in zero-copy mode they race the
// library's reads of the previous version, ordered by the kernel's write
// protection, which TSan cannot see (capture/zero_copy/zero_copy.cpp reads atomically
// under TSan for the same reason).
void FillVersion(uint64_t* buf, int64_t version, bool layered) {
  for (size_t i = 0; i < kBufferBytes / sizeof(uint64_t); ++i) {
    if (Writer(version, i, layered) == version) __atomic_store_n(&buf[i], Word(version, i), __ATOMIC_RELAXED);
  }
}

// Index of the first word that is not version's content, or -1.
long long FirstMismatch(const uint64_t* buf, int64_t version, bool layered) {
  for (size_t i = 0; i < kBufferBytes / sizeof(uint64_t); ++i) {
    if (buf[i] != Word(Writer(version, i, layered), i)) return static_cast<long long>(i);
  }
  return -1;
}

// What the child's client does: full versions, layered ones (pages), or
// zero-copy full versions (checkpoint.capture = zero-copy: the kill lands
// while an epoch is protected and read; the next version's writes race it),
// with userfaultfd or with mprotect + SIGSEGV write protection.
enum class Mode { kFull, kLayered, kZeroCopy, kZeroCopyMprotect };

bool IsZeroCopy(Mode mode) { return mode == Mode::kZeroCopy || mode == Mode::kZeroCopyMprotect; }

Config MakeConfig(const std::string& dir, Mode mode) {
  const bool layered = mode == Mode::kLayered;
  Config c = ScratchConfig(dir, 8 * kMiB, 256 * kKiB);
  c.keep_versions = 3;
  if (IsZeroCopy(mode)) c.capture = CaptureMode::kZeroCopy;
  c.write_protect = mode == Mode::kZeroCopyMprotect ? WriteProtectMode::kMprotect : WriteProtectMode::kUserfaultfd;
  if (layered) {
    c.changes = ChangeDetection::kPages;
    c.max_layers = 3;
  }
  return c;
}

// Runs in the forked child; never returns.
[[noreturn]] void ChildMain(const std::string& dir, int report_fd, Mode mode) {
  const bool layered = mode == Mode::kLayered;
  auto client = Client::Open(MakeConfig(dir, mode));
  if (!client.ok()) ::_exit(kChildOpenFailed);
  auto tracked = TrackedBuffer::Create(kBufferBytes);  // page-aligned: pages tracks it
  if (!tracked.ok()) ::_exit(kChildProtectFailed);
  auto* buf = static_cast<uint64_t*>(tracked->data());
  for (size_t i = 0; i < kBufferBytes / sizeof(uint64_t); ++i) buf[i] = Word(0, i);
  if (!(*client)->Protect(1, buf, kBufferBytes).ok()) ::_exit(kChildProtectFailed);
  // "Ready": the kill delay is counted from here, so that most kills land
  // in the checkpoint loop rather than in process start-up.
  const int64_t ready = 0;
  if (::write(report_fd, &ready, sizeof ready) != static_cast<ssize_t>(sizeof ready))
    ::_exit(kChildPipeFailed);
  for (int64_t v = 1; v < 1000000; ++v) {
    FillVersion(buf, v, layered);
    if (!(*client)->Checkpoint(kName, v).ok()) ::_exit(kChildCheckpointFailed);
    if (IsZeroCopy(mode) && (*client)->GetStats().zero_copy.fallbacks > 0) {
      std::fprintf(stderr, "child: %s\n", (*client)->GetStats().zero_copy.note.c_str());  // why
      ::_exit(kChildNotZeroCopy);
    }
    if (v % kCommitEvery == 0) {
      if (!(*client)->Wait(kName, v, Level::kLocal).ok()) ::_exit(kChildWaitFailed);
      // Reported only once committed.
      if (::write(report_fd, &v, sizeof v) != static_cast<ssize_t>(sizeof v))
        ::_exit(kChildPipeFailed);
    }
  }
  ::_exit(kChildRanOut);
}

// Reads one report from the child into *v. False at EOF (the child died),
// on an error, or when nothing came within limit_ms (bounds a hung child).
bool ReadReport(int fd, int64_t* v, int limit_ms) {
  struct pollfd pfd = {fd, POLLIN, 0};
  if (::poll(&pfd, 1, limit_ms) != 1) return false;
  return ::read(fd, v, sizeof *v) == static_cast<ssize_t>(sizeof *v);
}

uint64_t CrashSeed() {
  if (const char* s = std::getenv("CAIRN_CRASH_SEED"); s != nullptr && *s != '\0') {
    return std::strtoull(s, nullptr, 0);
  }
  return 0x5EEDC0DEull;
}

struct TrialResult {
  int64_t committed = 0;  // highest version the child reported committed (0 = none)
  int64_t latest = -1;    // what Latest() found (-1 = none)
  int files = 0;          // files with a final name
  int damaged = 0;        // of those, failing verification or restoring wrong data
  bool lost = false;      // a committed version is missing
};

class CrashTest : public ::testing::TestWithParam<Mode> {};

TEST_P(CrashTest, SigkillDuringCheckpointsLosesNothing) {
  const Mode mode = GetParam();
  const bool layered = mode == Mode::kLayered;
  const uint64_t seed = CrashSeed();
  std::cout << "[ crash    ] seed " << seed << " (set CAIRN_CRASH_SEED to replay)" << std::endl;
  RecordProperty("crash_seed", std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> delay_ms(5, 300);

  int total_lost = 0, total_damaged = 0, trials_with_commits = 0;
  auto ms = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
  for (int trial = 0; trial < kTrials; ++trial) {
    const int delay = delay_ms(rng);
    const bool gated = trial % 2 == 0;  // kill only after a first commit
    SCOPED_TRACE("trial " + std::to_string(trial) + ", kill " + std::to_string(delay) +
                 " ms after " + (gated ? "the first commit" : "start") + ", seed " +
                 std::to_string(seed));
    TempDir tmp("crash");
    ASSERT_FALSE(tmp.path().empty());
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0) << std::strerror(errno);

    const auto t_fork = std::chrono::steady_clock::now();
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0) << "fork: " << std::strerror(errno);
    if (pid == 0) {
      ::close(fds[0]);
      ChildMain(tmp.path(), fds[1], mode);
    }
    ::close(fds[1]);
    // Wait (bounded) for the child's "ready", then let it run `delay` ms.
    int64_t v = -1;
    ssize_t got = -1;
    struct pollfd pfd = {fds[0], POLLIN, 0};
    if (::poll(&pfd, 1, 20000) == 1) {
      got = ::read(fds[0], &v, sizeof v);  // EOF (0) if the child died early
    } else {
      ADD_FAILURE() << "the child did not open its client within 20 s";
    }
    const auto t_ready = std::chrono::steady_clock::now();
    TrialResult r;
    if (gated && got == static_cast<ssize_t>(sizeof v)) {
      // The child reports each version once committed; the limit only keeps
      // a hung child from hanging the test.
      if (int64_t first = 0; ReadReport(fds[0], &first, 120000)) {
        r.committed = first;
      } else {
        ADD_FAILURE() << "the child reported no commit (within 120 s)";
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    ::kill(pid, SIGKILL);
    int wstatus = 0;
    ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
    EXPECT_TRUE(got != static_cast<ssize_t>(sizeof v) || v == 0) << "bad ready marker " << v;
    // Everything the child wrote before dying is in the pipe.
    ssize_t n;
    while ((n = ::read(fds[0], &v, sizeof v)) == static_cast<ssize_t>(sizeof v)) {
      EXPECT_GT(v, r.committed) << "reports out of order";
      r.committed = std::max(r.committed, v);
    }
    ::close(fds[0]);
    if (!(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL)) {
      ADD_FAILURE() << "the child was not killed but "
                    << (WIFEXITED(wstatus) ? "exited with " + std::to_string(WEXITSTATUS(wstatus))
                                           : "died of signal " + std::to_string(WTERMSIG(wstatus)))
                    << " (20 open, 21 protect, 22 checkpoint, 23 wait, 24 pipe failed, 26 not zero-copy)";
      continue;
    }
    if (r.committed > 0) ++trials_with_commits;

    // Restart: what survived?
    const auto t_check = std::chrono::steady_clock::now();
    Config config = MakeConfig(tmp.path(), mode);
    config.host_cache_bytes = 1 * kMiB;  // the checker only reads files
    auto client_r = Client::Open(config);
    ASSERT_TRUE(client_r.ok()) << client_r.status().ToString();
    auto client = std::move(client_r).value();
    std::vector<uint64_t> buf(kBufferBytes / sizeof(uint64_t));
    ASSERT_OK(client->Protect(1, buf.data(), kBufferBytes));
    int layers = 0;  // layered files seen

    auto latest = client->Latest(kName);
    if (latest.ok()) {
      r.latest = *latest;
      Status s = client->Restore(kName, *latest);
      if (!s.ok()) {
        ADD_FAILURE() << "Restore(Latest=" << *latest << "): " << s.ToString();
        ++r.damaged;
      } else if (long long at = FirstMismatch(buf.data(), *latest, layered); at >= 0) {
        ADD_FAILURE() << "version " << *latest << " restored wrong data at word " << at;
        ++r.damaged;
      }
    } else {
      EXPECT_EQ(latest.status().code(), Code::kNotFound) << latest.status().ToString();
    }
    if (r.committed > 0 && r.latest < r.committed) {
      r.lost = true;
      ADD_FAILURE() << "committed version " << r.committed << " lost: Latest gives "
                    << (latest.ok() ? std::to_string(*latest) : latest.status().ToString());
    }

    // Every file with a final name is complete (Latest's content was checked
    // above; the others verify block by block).
    const std::string name_dir = config.scratch_dir + "/" + kName;
    std::vector<int64_t> versions;
    std::error_code ec;
    for (fs::directory_iterator it(name_dir, ec), end; !ec && it != end; it.increment(ec)) {
      auto parsed = format::ParseEntryFileName(it->path().filename().string());
      if (parsed && parsed->kind == format::EntryKind::kCheckpoint)
        versions.push_back(parsed->number);
    }
    std::sort(versions.begin(), versions.end());
    for (int64_t version : versions) {
      ++r.files;
      const std::string path =
          name_dir + "/" + format::EntryFileName(format::EntryKind::kCheckpoint, version);
      auto reader = format::FileReader::Open(os::FileSystem::Default(), path);
      Status s = reader.status();
      if (s.ok()) s = (*reader)->VerifyAll();
      if (s.ok() && (*reader)->record().layered()) ++layers;
      if (s.ok() && (*reader)->info().number != version) {
        s = Status::Corrupt("file says version " + std::to_string((*reader)->info().number));
      }
      if (s.ok() && (*reader)->layout().payload_bytes != kBufferBytes) {
        s = Status::Corrupt("payload of " + std::to_string((*reader)->layout().payload_bytes) +
                            " bytes");
      }
      if (!s.ok()) {
        ++r.damaged;
        ADD_FAILURE() << path << " is damaged: " << s.ToString();
      }
    }
    if (r.committed > 0) {
      EXPECT_TRUE(std::binary_search(versions.begin(), versions.end(), r.committed) ||
                  (!versions.empty() && versions.back() > r.committed))
          << "no file for committed version " << r.committed;
    }

    // The application goes on from there: a new version commits beside the
    // dead process's leftovers (every few trials: it costs an fsync).
    if (trial % 4 == 0) {
      const int64_t next = std::max<int64_t>(r.latest, 0) + 1000;
      for (size_t i = 0; i < buf.size(); ++i) buf[i] = Word(next, i);
      ASSERT_OK(client->Checkpoint(kName, next));
      Status w = client->Wait(kName, next, Level::kLocal);
      EXPECT_TRUE(w.ok()) << w.ToString();
      auto after = client->Latest(kName);
      ASSERT_TRUE(after.ok()) << after.status().ToString();
      EXPECT_EQ(*after, next);
      ASSERT_OK(client->Restore(kName, next));
      for (size_t i = 0; i < buf.size(); ++i) ASSERT_EQ(buf[i], Word(next, i)) << "word " << i;
    }
    if (layered && r.latest > kSpread) {
      // Past the first versions, a layered run leaves layers behind.
      EXPECT_GT(layers, 0) << "no layered file among " << r.files;
    }
    ASSERT_OK(client->Close());

    std::cout << "[ crash    ] trial " << trial << ": kill " << delay << " ms after "
              << (gated ? "the first commit" : "start") << ", committed " << r.committed
              << ", latest " << r.latest << ", " << r.files << " files, " << r.damaged
              << " damaged (" << ms(t_ready - t_fork) << " ms to start, "
              << ms(std::chrono::steady_clock::now() - t_check) << " ms to check)" << std::endl;
    total_lost += r.lost ? 1 : 0;
    total_damaged += r.damaged;
  }
  EXPECT_EQ(total_lost, 0);
  EXPECT_EQ(total_damaged, 0);
  // "Nothing committed was lost" says nothing about trials without commits.
  std::cout << "[ crash    ] " << trials_with_commits << " of " << kTrials
            << " trials had committed versions" << std::endl;
  EXPECT_GE(trials_with_commits, kMinTrialsWithCommits);
}

INSTANTIATE_TEST_SUITE_P(Versions, CrashTest,
                         ::testing::Values(Mode::kFull, Mode::kLayered, Mode::kZeroCopy, Mode::kZeroCopyMprotect),
                         [](const auto& p) {
                           return std::string(p.param == Mode::kFull       ? "Full"
                                              : p.param == Mode::kLayered  ? "Layered"
                                              : p.param == Mode::kZeroCopy ? "ZeroCopy"
                                                                           : "ZeroCopyMprotect");
                         });

}  // namespace
}  // namespace cairn
