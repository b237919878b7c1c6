// Cairn's own progress thread in a group whose transport allows it
// (Group::thread_multiple; docs/mpi.md "Progress"): the global commit is
// recorded and the partner copy (L2) stored while the application makes no
// Cairn call at all. Two members over an in-process group (no MPI), one
// thread each; the test watches the files, not the client.
#include <gtest/gtest.h>

#include <filesystem>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cairn/cairn.hpp"
#include "cairn/group.hpp"
#include "os/fs/fs.hpp"
#include "redundancy/manifest.hpp"
#include "redundancy/partner/partner.hpp"
#include "testing/fs/gate_fs.hpp"
#include "testing/group/loopback_group.hpp"
#include "testing/test_util.hpp"

namespace cairn {
namespace {

using namespace test;

class BackgroundProgressTest : public ScratchDirTest {
 protected:
  BackgroundProgressTest() : ScratchDirTest("progress") {}

  // Opens a member's client in `group`, protects 200 KiB and checkpoints
  // version 1 of "sim".
  static std::unique_ptr<Client> CheckpointOne(const Config& c, std::unique_ptr<Group> group,
                                               std::vector<uint8_t>* data) {
    auto opened = OpenInGroup(c, std::move(group));
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    if (!opened.ok()) return nullptr;
    EXPECT_OK((*opened)->Protect(1, data->data(), data->size()));
    EXPECT_OK((*opened)->Checkpoint("sim", 1));
    return std::move(opened).value();
  }

  // Runs `member(rank, group)` on one thread per member of a fresh hub.
  void RunMembers(LoopbackHub& hub,
                  const std::function<void(int, std::unique_ptr<Group>)>& member) {
    std::vector<std::thread> threads;
    for (int r = 0; r < hub.size(); ++r) {
      threads.emplace_back([&, r] { member(r, std::make_unique<LoopbackGroup>(&hub, r)); });
    }
    for (auto& t : threads) t.join();
  }
};

// Each member checkpoints version 1, then only watches its files: its
// manifest must record version 1 as the global commit and its partner's
// copy of version 1 must arrive, with no further Cairn call. Then both
// close (collective) and a restart finds version 1.
TEST_F(BackgroundProgressTest, GlobalCommitAndPartnerCopyWithoutCairnCalls) {
  LoopbackHub hub(2);
  hub.nonblocking = true;
  hub.thread_multiple = true;
  Config c = MakeConfig();
  c.l2_every = 1;
  RunMembers(hub, [&](int rank, std::unique_ptr<Group> group) {
    std::vector<uint8_t> data = LcgPattern(200 * kKiB, 1, static_cast<uint64_t>(rank));
    auto opened = CheckpointOne(c, std::move(group), &data);
    ASSERT_NE(opened, nullptr);
    Client& client = *opened;
    const Config mine = client.config();  // the member's own directories
    const bool recorded = PollUntil(
        [&] {
          auto m = collective::ReadManifest(os::FileSystem::Default(), mine.scratch_dir, "sim");
          return m.ok() && m->committed >= 1;
        },
        std::chrono::minutes(1));
    EXPECT_TRUE(recorded) << "rank " << rank
                          << ": the global commit of version 1 was never recorded";
    const std::string copy = partner::CopyDir(mine, 1 - rank) + "/sim/" + VersionFileName(1);
    const bool copied =
        PollUntil([&] { return std::filesystem::exists(copy); }, std::chrono::minutes(1));
    EXPECT_TRUE(copied) << "rank " << rank << ": " << copy << " never arrived";
    EXPECT_OK(client.Close());
  });
}

// The same group without thread_multiple: no thread of Cairn's own, the
// progress stays at the Cairn calls, and they still complete the copy
// and the global commit (the wait, then close).
TEST_F(BackgroundProgressTest, WithoutThreadMultipleTheCallsProgress) {
  LoopbackHub hub(2);
  hub.nonblocking = true;
  Config c = MakeConfig();
  c.l2_every = 1;
  RunMembers(hub, [&](int rank, std::unique_ptr<Group> group) {
    std::vector<uint8_t> data = LcgPattern(200 * kKiB, 2, static_cast<uint64_t>(rank));
    auto opened = CheckpointOne(c, std::move(group), &data);
    ASSERT_NE(opened, nullptr);
    Client& client = *opened;
    const Config mine = client.config();
    ASSERT_OK(client.Wait("sim", 1, Level::kLocal));  // collective: the partner copy is stored
    EXPECT_TRUE(
        std::filesystem::exists(partner::CopyDir(mine, 1 - rank) + "/sim/" + VersionFileName(1)));
    auto m = collective::ReadManifest(os::FileSystem::Default(), mine.scratch_dir, "sim");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_GE(m->committed, 1);
    EXPECT_OK(client.Close());
  });
}

// L3 with Cairn's own progress thread: the wait of an L3 turn returns while
// its parity cannot even be opened (held at a gate), and the parity is
// stored in the background once the gate opens, with no Cairn call.
TEST_F(BackgroundProgressTest, TheWaitOfAnL3TurnDoesNotWaitForItsParity) {
  LoopbackHub hub(3);
  hub.nonblocking = true;
  hub.thread_multiple = true;
  GateFs gate("/.xor/");
  Config c = MakeConfig();
  c.l3_every = 1;
  c.fs = &gate;
  std::latch waited(3);
  std::thread opener([&] {
    waited.wait();
    gate.Release();
  });
  RunMembers(hub, [&](int rank, std::unique_ptr<Group> group) {
    std::vector<uint8_t> data = LcgPattern(300 * kKiB, 3, static_cast<uint64_t>(rank));
    auto opened = CheckpointOne(c, std::move(group), &data);
    ASSERT_NE(opened, nullptr);
    Client& client = *opened;
    EXPECT_OK(
        client.Wait("sim", 1, Level::kLocal));  // returns with the parity's files held at the gate
    waited.count_down();
    const bool protected_l3 = PollUntil(
        [&] {
          auto st = ProgressGlobalCommit(client, "sim");
          return st.ok() && st->l3_version >= 1;
        },
        std::chrono::minutes(1));
    EXPECT_TRUE(protected_l3) << "rank " << rank << ": the parity of version 1 was never stored";
    EXPECT_EQ(client.GetStats().mpi.l3_parity_writes, 1u);
    EXPECT_OK(client.Close());
  });
  opener.join();
}

}  // namespace
}  // namespace cairn
