// SIGKILL during compaction (format::CompactVersion, `cairn compact`): a
// child rewrites the tips of a chain as full versions and is killed at a
// random moment. Afterwards every version of the chain restores byte-exact,
// and the layer written on a compacted version still finds its base (same
// number, same content id): no chain is ever broken, whether the kill came
// before, during or after a rename.
//
// The kill delay is counted from the child's "started" report (a gate, not a
// sleep); the seed is printed, CAIRN_CRASH_SEED=<n> replays a run.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cairn/cairn.hpp"
#include "format/compact.hpp"
#include "format/file_reader.hpp"
#include "format/naming.hpp"
#include "os/fs/fs.hpp"
#include "testing/chain_files.hpp"
#include "testing/test_util.hpp"

namespace cairn {
namespace {

using namespace test;

constexpr uint64_t kBytes = 6 * kMiB + 4096;
constexpr int kTrials = 12;
const char* const kName = "chain";

uint64_t Seed() {
  if (const char* s = std::getenv("CAIRN_CRASH_SEED"); s != nullptr && *s != '\0') {
    return std::strtoull(s, nullptr, 0);
  }
  return 0xC0FFEEull;
}

// In the child: compact v4, then v6, in small windows (many reads and
// writes, so that kills land inside), reporting the start. Never returns.
[[noreturn]] void Compacter(const std::string& dir, int report_fd) {
  const char ready = 'r';
  if (::write(report_fd, &ready, 1) != 1) ::_exit(21);
  for (int64_t v : {4, 6}) {
    auto r = format::CompactVersion(os::FileSystem::Default(), dir, kName, v, format::EntryKind::kCheckpoint,
                                    format::WriterOptions{.direct = false, .fsync = true}, 256 * kKiB);
    if (!r.ok()) ::_exit(22);
  }
  ::_exit(0);
}

TEST(CompactCrashTest, SigkillDuringCompactionBreaksNoChain) {
  const uint64_t seed = Seed();
  std::cout << "[ compact  ] seed " << seed << " (set CAIRN_CRASH_SEED to replay)" << std::endl;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> delay_us(0, 60000);
  int compacted = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    const int delay = delay_us(rng);
    SCOPED_TRACE("trial " + std::to_string(trial) + ", kill " + std::to_string(delay) + " us after start");
    TempDir tmp("compact_crash");
    ASSERT_FALSE(tmp.path().empty());
    Config config = ScratchConfig(tmp.path(), 1 * kMiB, 64 * kKiB);
    config.keep_versions = 100;
    const std::string dir = config.scratch_dir;
    ASSERT_OK(os::FileSystem::Default()->CreateDirs(dir, 0700));
    const ChainFiles files{.fs = os::FileSystem::Default(), .dir = dir, .name = kName, .bytes = kBytes,
                           .block_bytes = 64 * 1024};
    // v1 full, v2..v6 layered, each on the one before.
    const std::vector<ChainFiles::Written> written = files.WriteChain(1, 5);
    ASSERT_EQ(written.size(), 6u);
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0) << std::strerror(errno);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0) << std::strerror(errno);
    if (pid == 0) {
      ::close(fds[0]);
      Compacter(dir, fds[1]);
    }
    ::close(fds[1]);
    struct pollfd pfd = {fds[0], POLLIN, 0};
    char ready = 0;
    ASSERT_EQ(::poll(&pfd, 1, 20000), 1) << "the child did not start";
    ASSERT_EQ(::read(fds[0], &ready, 1), 1);
    std::this_thread::sleep_for(std::chrono::microseconds(delay));
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ::close(fds[0]);
    ASSERT_TRUE(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0))
        << "the child failed on its own: exit " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);

    // Every version restores what was written, through a client.
    auto c = Client::Open(config);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    std::vector<uint8_t> buf(kBytes);
    ASSERT_OK((*c)->Protect(files.region_id, buf.data(), buf.size()));
    for (int64_t v = 1; v <= 6; ++v) {
      std::fill(buf.begin(), buf.end(), 0);
      const Status s = (*c)->Restore(kName, v);
      ASSERT_TRUE(s.ok()) << "version " << v << ": " << s.ToString();
      EXPECT_TRUE(buf == written[v - 1].content) << "version " << v << " restored wrong data";
      // Compacted or not, it is the same version (its id is what v+1 names).
      auto r = format::FileReader::Open(os::FileSystem::Default(),
                                        format::EntryPath(dir, kName, format::EntryKind::kCheckpoint, v));
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ((*r)->record().content_id, written[v - 1].content_id) << "version " << v;
      if (v == 4 && !(*r)->record().layered()) ++compacted;
    }
    auto latest = (*c)->Latest(kName);
    ASSERT_TRUE(latest.ok()) << latest.status().ToString();
    EXPECT_EQ(*latest, 6);
    ASSERT_OK((*c)->Close());
  }
  std::cout << "[ compact  ] v4 was compacted when killed in " << compacted << " of " << kTrials << " trials"
            << std::endl;
}

}  // namespace
}  // namespace cairn
