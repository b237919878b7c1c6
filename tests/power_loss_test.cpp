// Power loss at every step: a client checkpoints three versions, waiting for
// each at one level, on a FaultFs that cuts the power at its kth mutating
// file-system call (testing/fs/power_loss.hpp). Then the tree is rewritten to
// what survives a power loss (unsynced data and directory changes dropped or
// torn), a new client opens it, and:
//   * Latest() gives a version that restores with exactly its data;
//   * every version whose Wait() returned OK before the cut (and that
//     retention had no reason to remove) restores with exactly its data.
// k runs over every mutating call of the whole run (counted by a run without
// a cut), so the cut lands in every step of the commit protocol
// (docs/format.md 3.3), in retention, and, waiting for kPersistent, in the
// persister's write from the cache or (FileCopy) in the mover's copy of the
// local file. The cut is counted in calls, not time; with the persister
// writing beside the flusher, which call is the kth may differ between runs,
// and any order must keep what was acknowledged.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "cairn/cairn.hpp"
#include "format/chain.hpp"
#include "testing/chain_files.hpp"
#include "testing/fs/fault_fs.hpp"
#include "testing/test_util.hpp"

namespace cairn {
namespace {

using namespace test;

constexpr size_t kBytes = 80 * kKiB;  // two blocks, the last one short
constexpr uint64_t kBlock = 64 * kKiB;
constexpr int64_t kVersions = 3;
constexpr int kKeep = 2;
const char* const kName = "sim";

struct Scenario {
  Level level;        // what the application waits for after each checkpoint
  Unsynced unsynced;  // what the power loss does to unsynced changes
  // kPersistent: written from the host cache by the persister (the default),
  // or copied from the local file by the mover (storage.persist_from_cache
  // = false).
  bool from_cache = true;
};

void PrintTo(const Scenario& s, std::ostream* os) {
  *os << (s.level == Level::kPersistent ? "wait persistent" : "wait local") << ", unsynced "
      << (s.unsynced == Unsynced::kDrop   ? "dropped"
          : s.unsynced == Unsynced::kTear ? "torn"
                                          : "kept")
      << (s.from_cache ? "" : ", copied from the local file");
}

std::string ScenarioName(const ::testing::TestParamInfo<Scenario>& info) {
  const Scenario& s = info.param;
  std::string name = s.level == Level::kPersistent ? "Persistent" : "Local";
  name += s.unsynced == Unsynced::kDrop ? "Drop" : s.unsynced == Unsynced::kTear ? "Tear" : "Keep";
  if (!s.from_cache) name += "FileCopy";
  return name;
}

class PowerLossAtEveryStep : public ::testing::TestWithParam<Scenario> {
 protected:
  void SetUp() override { ASSERT_FALSE(tmp_.path().empty()); }

  Config MakeConfig(const std::string& root) {
    Config c = ScratchConfig(root, 1 * kMiB, kBlock);
    c.keep_versions = kKeep;
    c.init = CacheInit::kEager;  // no initializer thread: nothing here depends on it
    if (GetParam().level == Level::kPersistent) c.persistent_dir = root + "/persistent";
    c.persist_from_cache = GetParam().from_cache;
    c.fs = &fs_;
    return c;
  }

  // Checkpoints versions 1..kVersions, waiting for each; returns those whose
  // Wait returned OK (acknowledged), in order.
  std::vector<int64_t> Run(const std::string& root) {
    std::vector<int64_t> acked;
    auto client = Client::Open(MakeConfig(root));
    if (!client.ok()) return acked;  // the cut came while opening
    std::vector<uint8_t> buf(kBytes);
    EXPECT_OK((*client)->Protect(1, buf.data(), buf.size()));
    for (int64_t v = 1; v <= kVersions; ++v) {
      FillSplitMix(buf.data(), buf.size(), static_cast<uint64_t>(v), /*salt=*/7);
      if (!(*client)->Checkpoint(kName, v).ok()) continue;
      if ((*client)->Wait(kName, v, GetParam().level).ok()) acked.push_back(v);
    }
    (void)(*client)->Close();  // fails after a cut
    return acked;
  }

  // After the power loss: what a new client finds. `trace` names the trial.
  void Check(const std::string& root, const std::vector<int64_t>& acked, const std::string& trace) {
    SCOPED_TRACE(trace);
    if (GetParam().level == Level::kPersistent) {
      // The node is gone with its local disk: the persistent tier alone must
      // hold what was acknowledged there.
      std::error_code ec;
      std::filesystem::remove_all(root + "/scratch", ec);
      ASSERT_FALSE(ec) << ec.message();
      ASSERT_OK(fs_.TrackPowerLoss(root));  // the tree changed behind its back
    }
    auto client_r = Client::Open(MakeConfig(root));
    ASSERT_TRUE(client_r.ok()) << client_r.status().ToString();
    auto client = std::move(client_r).value();
    std::vector<uint8_t> buf(kBytes);
    ASSERT_OK(client->Protect(1, buf.data(), buf.size()));
    auto restores = [&](int64_t v) -> ::testing::AssertionResult {
      Status s = client->Restore(kName, v);
      if (!s.ok()) return ::testing::AssertionFailure() << "Restore(" << v << "): " << s.ToString();
      return SameBytes(buf, SplitMixPattern(kBytes, static_cast<uint64_t>(v), 7))
             << " (version " << v << ")";
    };

    auto latest = client->Latest(kName);
    if (latest.ok()) {
      EXPECT_TRUE(restores(*latest));
    } else {
      EXPECT_EQ(latest.status().code(), Code::kNotFound) << latest.status().ToString();
    }
    if (!acked.empty()) {
      ASSERT_TRUE(latest.ok()) << "acknowledged " << acked.back()
                               << ", Latest: " << latest.status().ToString();
      EXPECT_GE(*latest, acked.back()) << "acknowledged version " << acked.back() << " lost";
    }
    // Retention keeps the newest kKeep committed versions; besides the
    // acknowledged ones, at most the version in flight at the cut committed.
    for (int64_t v : acked) {
      if (v >= acked.back() - kKeep + 2) {
        EXPECT_TRUE(restores(v));
      }
    }
    ASSERT_OK(client->Close());
  }

  TempDir tmp_{"power_loss"};
  FaultFs fs_;
};

TEST_P(PowerLossAtEveryStep, AcknowledgedVersionsSurviveAndLatestVerifies) {
  // The run without a cut: how many mutating calls there are to cut at.
  std::string root = tmp_.path() + "/dry";
  ASSERT_OK(os::FileSystem::Default()->CreateDirs(root, 0700));
  ASSERT_OK(fs_.TrackPowerLoss(root));
  std::vector<int64_t> acked = Run(root);
  ASSERT_EQ(acked.size(), static_cast<size_t>(kVersions)) << "the run without faults failed";
  const uint64_t calls = fs_.tracked_mutations();
  ASSERT_GT(calls, 3u * kVersions);
  ASSERT_OK(fs_.PowerLoss(GetParam().unsynced));
  Check(root, acked, "power loss after the run");
  if (HasFatalFailure()) return;

  int trials_with_acks = 0;
  uint64_t cuts = 0;  // trials whose cut came (the last few may not: retention
                      // may skip a removal, depending on the mover's timing)
  for (uint64_t k = 1; k <= calls; ++k) {
    root = tmp_.path() + "/k" + std::to_string(k);
    ASSERT_OK(os::FileSystem::Default()->CreateDirs(root, 0700));
    ASSERT_OK(fs_.TrackPowerLoss(root));
    fs_.ArmPowerCut(k);
    acked = Run(root);
    cuts += fs_.power_cut() ? 1 : 0;
    ASSERT_OK(fs_.PowerLoss(GetParam().unsynced));
    trials_with_acks += acked.empty() ? 0 : 1;
    Check(root, acked,
          "power cut at mutating call " + std::to_string(k) + " of " + std::to_string(calls) +
              ", acknowledged " + std::to_string(acked.size()));
    if (HasFatalFailure()) return;
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
  // The cuts must reach past commits, or "nothing acknowledged was lost"
  // says nothing.
  EXPECT_GE(trials_with_acks, kVersions) << "of " << calls << " trials";
  EXPECT_GE(cuts, calls - calls / 4) << "of " << calls << " trials";
}

INSTANTIATE_TEST_SUITE_P(, PowerLossAtEveryStep,
                         ::testing::Values(Scenario{Level::kLocal, Unsynced::kDrop},
                                           Scenario{Level::kLocal, Unsynced::kTear},
                                           Scenario{Level::kPersistent, Unsynced::kDrop},
                                           Scenario{Level::kPersistent, Unsynced::kTear},
                                           Scenario{Level::kPersistent, Unsynced::kDrop, false},
                                           Scenario{Level::kPersistent, Unsynced::kTear, false}),
                         ScenarioName);

// A layered version (format v2) written over a committed chain (v1 full, v2
// on v1), the power cut at every mutating call of its write, as a capture
// that writes layered versions will do: the chain below is never broken (v1
// and v2 open and restore byte-exact), v3 is either absent or whole (its
// chain opens and restores byte-exact), present once its write returned OK,
// and a client over the tree restores a latest version that is at least the
// acknowledged one. The writes are the format's writer's (the capture path
// does not write layered versions yet), so the cut lands in every step of the
// commit protocol of a layer.
class PowerLossLayered : public ::testing::TestWithParam<Unsynced> {
 protected:
  ChainFiles Files(const std::string& root, Status* error = nullptr) {
    return {.fs = &fs_, .dir = root + "/scratch", .name = kName, .bytes = kBytes,
            .block_bytes = 16 * kKiB, .options = {.direct = false, .fsync = true, .mode = 0600},
            .error = error};
  }

  // v1 and v2 committed (and durable: tracking starts after them).
  std::vector<ChainFiles::Written> Base(const std::string& root) {
    EXPECT_OK(os::FileSystem::Default()->CreateDirs(root, 0700));
    auto chain = Files(root).WriteChain(1, 1);
    EXPECT_OK(fs_.TrackPowerLoss(root));
    return chain;
  }

  ::testing::AssertionResult Restores(const std::string& root, int64_t v,
                                      const std::vector<uint8_t>& want) {
    auto chain = format::Chain::Open(&fs_, root + "/scratch", kName, v);
    if (!chain.ok()) return ::testing::AssertionFailure() << chain.status().ToString();
    std::vector<uint8_t> buf(kBytes);
    const format::RegionTarget t{.id = 1, .dst = buf.data()};
    Status s = format::RestoreChain(&fs_, *chain, {&t, 1});
    if (!s.ok()) return ::testing::AssertionFailure() << s.ToString();
    return SameBytes(buf, want) << " (version " << v << ")";
  }

  void Check(const std::string& root, const std::vector<ChainFiles::Written>& chain, bool acked) {
    EXPECT_TRUE(Restores(root, 1, chain[0].content));
    EXPECT_TRUE(Restores(root, 2, chain[1].content));
    const bool there = std::filesystem::exists(root + "/scratch/" + kName + "/" + VersionFileName(3));
    if (acked) {
      EXPECT_TRUE(there) << "acknowledged v3 lost";
    }
    if (there) {
      EXPECT_TRUE(Restores(root, 3, chain[2].content));
    }
    Config c = ScratchConfig(root, 1 * kMiB, kBlock);
    c.init = CacheInit::kEager;
    c.fs = &fs_;  // the tree changes only through it while it tracks the root
    auto client = Client::Open(c);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    std::vector<uint8_t> buf(kBytes);
    ASSERT_OK((*client)->Protect(1, buf.data(), buf.size()));
    auto got = (*client)->RestoreLatest(kName);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, there ? 3 : 2);
    EXPECT_TRUE(SameBytes(buf, chain[*got - 1].content));
    ASSERT_OK((*client)->Close());
  }

  TempDir tmp_{"power_loss_layered"};
  FaultFs fs_;
};

TEST_P(PowerLossLayered, ALayerOverACommittedChainNeverBreaksIt) {
  std::string root = tmp_.path() + "/dry";
  auto chain = Base(root);
  chain.push_back(Files(root).WriteLayer(3, 2, chain[1]));
  const uint64_t calls = fs_.tracked_mutations();
  ASSERT_GE(calls, 4u);  // temp file, writes, sync, rename, directory sync
  ASSERT_OK(fs_.PowerLoss(GetParam()));
  Check(root, chain, /*acked=*/true);
  for (uint64_t k = 1; k <= calls; ++k) {
    SCOPED_TRACE("power cut at mutating call " + std::to_string(k) + " of " +
                 std::to_string(calls));
    root = tmp_.path() + "/k" + std::to_string(k);
    const auto base = Base(root);
    fs_.ArmPowerCut(k);
    Status error;
    const ChainFiles::Written v3 = Files(root, &error).WriteLayer(3, 2, base[1]);
    ASSERT_OK(fs_.PowerLoss(GetParam()));
    Check(root, {base[0], base[1], v3}, error.ok());
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(, PowerLossLayered,
                         ::testing::Values(Unsynced::kDrop, Unsynced::kTear, Unsynced::kKeep),
                         [](const ::testing::TestParamInfo<Unsynced>& p) {
                           return std::string(p.param == Unsynced::kDrop   ? "Drop"
                                              : p.param == Unsynced::kTear ? "Tear"
                                                                           : "Keep");
                         });

}  // namespace
}  // namespace cairn
