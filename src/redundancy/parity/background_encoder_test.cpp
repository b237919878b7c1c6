// The L3 encoding in the background (background_encoder.hpp) on a set of
// four in-process members, each with its own encoder thread over a
// test::LoopbackGroup: the encoding pauses before a window while its
// member's application is busy (back-pressure), and a Drain, which the
// application waits in, ends the pause.
#include "redundancy/parity/background_encoder.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "format/naming.hpp"
#include "redundancy/parity/parity_set_test_util.hpp"
#include "testing/group/fake_checkpoints.hpp"

namespace cairn {
namespace {

using namespace test;

class BackgroundEncoderTest : public ParitySetTest {
 protected:
  BackgroundEncoderTest() : ParitySetTest("background_encoder", L3Code::kXor, 11), hub_(kMembers) {}

  void StartEncoders() {
    for (int r = 0; r < kMembers; ++r) {
      local_[r].wait_local = [](const std::string&, int64_t) { return Status::Ok(); };
      auto sets = parity::SetsFromNodes({0, 1, 2, 3}, r, 0, code_);
      ASSERT_TRUE(sets.ok()) << sets.status().ToString();
      encoders_[r] = std::make_unique<parity::BackgroundEncoder>(
          std::make_unique<LoopbackGroup>(&hub_, r), *sets, std::nullopt, configs_[r], &local_[r],
          nullptr);
    }
  }

  void QueueAll() {
    for (auto& e : encoders_) e->Queue("sim", 1);
  }
  // Drains every member at once (a Drain returns once the set encoded what
  // was queued); each member's outcome.
  std::vector<Status> DrainAll() {
    std::vector<Status> out(kMembers);
    std::vector<std::jthread> threads;
    for (int r = 0; r < kMembers; ++r)
      threads.emplace_back([&, r] { out[r] = encoders_[r]->Drain(); });
    threads.clear();  // joined
    return out;
  }

  // Bytes written so far in member r's parity directory (temp files too).
  uint64_t ParityBytes(int r) const {
    uint64_t n = 0;
    for (const std::string& name : ParityEntries(r)) n += Slurp(ParityDir(r) + "/" + name).size();
    return n;
  }

  LoopbackHub hub_;
  FakeCheckpoints local_[kMembers];  // before encoders_: outlives them
  std::unique_ptr<parity::BackgroundEncoder> encoders_[kMembers];
};

TEST_F(BackgroundEncoderTest, AnEncodingPausesBeforeAWindowWhileTheApplicationIsBusy) {
  // Member 2's application is busy until the encoding first pauses; then,
  // no member has written a byte of parity (every window needs member 2's
  // messages), and the application goes idle.
  local_[2].busy = true;
  std::atomic<int> pauses{0};
  std::vector<uint64_t> written_at_pause;
  std::promise<void> paused;
  local_[2].await_idle = [&] {
    if (pauses.fetch_add(1) == 0) {
      for (int r = 0; r < kMembers; ++r) written_at_pause.push_back(ParityBytes(r));
      local_[2].busy = false;
      paused.set_value();
    }
  };
  StartEncoders();
  QueueAll();
  paused.get_future().wait();  // no Drain before: a Drain ends any pause
  for (const Status& s : DrainAll()) EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(pauses.load(), 1);
  EXPECT_EQ(written_at_pause, std::vector<uint64_t>(kMembers, 0));
  for (int r = 0; r < kMembers; ++r) EXPECT_FALSE(Slurp(ParityPath(r)).empty()) << r;
}

TEST_F(BackgroundEncoderTest, ADrainEndsThePauseOfABusyApplication) {
  // Member 0's application stays busy: without the Drain's override its
  // encoding, and the set's, would never end.
  local_[0].busy = true;
  local_[0].await_idle = [] { std::this_thread::yield(); };
  StartEncoders();
  QueueAll();
  for (const Status& s : DrainAll()) EXPECT_TRUE(s.ok()) << s.ToString();
  for (int r = 0; r < kMembers; ++r) EXPECT_FALSE(Slurp(ParityPath(r)).empty()) << r;
}

// After a node loss, an older version's recovery in the background
// (QueueOlder) yields to the application like an encoding: member 2's
// application is busy until the recovery first pauses, and by then member
// 1, whose node was lost, has nothing of version 1 back; once member 2's
// application goes idle, member 1 gets its file and its parity back.
TEST_F(BackgroundEncoderTest, AnOlderVersionsRecoveryPausesWhileTheApplicationIsBusy) {
  StartEncoders();
  QueueAll();
  for (const Status& s : DrainAll()) ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string file = "/sim/" + format::EntryFileName(format::EntryKind::kCheckpoint, 1);
  const std::vector<uint8_t> lost = Slurp(configs_[1].scratch_dir + file);
  std::filesystem::remove_all(configs_[1].scratch_dir);
  for (int r = 0; r < kMembers; ++r) {
    local_[r].intact_versions = [r](const std::string&) {
      return r == 1 ? std::vector<int64_t>{} : std::vector<int64_t>{1};
    };
  }
  local_[2].busy = true;
  std::atomic<int> pauses{0};
  bool back_at_pause = true;
  std::promise<void> paused;
  local_[2].await_idle = [&] {
    if (pauses.fetch_add(1) == 0) {
      back_at_pause = !Slurp(configs_[1].scratch_dir + file).empty();
      local_[2].busy = false;
      paused.set_value();
    }
  };
  for (auto& e : encoders_) e->QueueOlder("sim", 2, 1);  // version 1: the newest below 2
  paused.get_future().wait();
  for (const Status& s : DrainAll()) EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(back_at_pause) << "nothing was rebuilt before member 2's first pause";
  EXPECT_EQ(pauses.load(), 1);
  EXPECT_EQ(Slurp(configs_[1].scratch_dir + file), lost);
  EXPECT_FALSE(Slurp(ParityPath(1)).empty()) << "its own parity of version 1, encoded again";
}

}  // namespace
}  // namespace cairn
