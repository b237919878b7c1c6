// A parity set of four in-process members for the L3 tests
// (test::LoopbackGroup, one thread each): each member's version 1 of "sim"
// checkpointed in its own directory, bundles of different sizes (the
// longest sets the chunk, over several windows; the others are
// zero-padded, one is shorter than a chunk), and the members' steps run
// at once. kLarge's chunk is longer than a parity row's write
// (impl::kRowWriteBytes): each row goes to its file in several writes.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "cairn/cairn.hpp"
#include "format/naming.hpp"
#include "os/fs/fs.hpp"
#include "redundancy/parity/xor_parity.hpp"
#include "redundancy/redundancy.hpp"
#include "testing/group/loopback_group.hpp"
#include "testing/test_util.hpp"

namespace cairn::test {

class ParitySetTest : public ScratchDirTest {
 protected:
  static constexpr int kMembers = 4;
  using Sizes = std::array<size_t, kMembers>;
  static constexpr Sizes kSmall = {300 * kKiB + 5, 200 * kKiB, 1 * kMiB + 3, 64 * kKiB};
  static constexpr Sizes kLarge = {300 * kKiB + 5, 20 * kMiB + 7, 1 * kMiB + 3, 64 * kKiB};

  // `stem`: the test's directory; `code`: mpi.l3_code; `seed`: the data's;
  // `sizes`: each member's protected bytes.
  ParitySetTest(const std::string& stem, L3Code code, uint64_t seed, const Sizes& sizes = kSmall)
      : ScratchDirTest(stem), code_(code), seed_(seed), sizes_(sizes) {}

  void SetUp() override {
    ScratchDirTest::SetUp();
    for (int r = 0; r < kMembers; ++r) {
      Config c = MakeConfig(2 * kMiB);
      c.scratch_dir += "/rank" + std::to_string(r);
      c.l3_code = code_;
      configs_[r] = c;
      std::vector<uint8_t> data(sizes_[r]);
      FillSplitMix(data.data(), data.size(), seed_, static_cast<uint64_t>(r));
      auto client = OpenClient(c);
      ASSERT_NE(client, nullptr);
      ASSERT_TRUE(client->Protect(0, data.data(), data.size()).ok());
      ASSERT_TRUE(client->Checkpoint("sim", 1).ok());
      ASSERT_TRUE(client->Wait("sim", 1, Level::kLocal).ok());
      ASSERT_TRUE(client->Close().ok());
      auto bundle = redundancy::Bundle(c, c.scratch_dir, "sim", 1);
      ASSERT_TRUE(bundle.ok()) << bundle.status().ToString();
      bundles_[r] = std::move(*bundle);
    }
  }

  // step(group, sets, r) -> Result<R> on every member at once, one thread
  // each, over the sets of this test's code; each member's outcome.
  template <typename R, typename Step>
  std::vector<Result<R>> OnEveryMember(const Step& step) const {
    LoopbackHub hub(kMembers);
    std::vector<Result<R>> out(kMembers, Status::Internal("not run"));
    {
      std::vector<std::jthread> threads;
      for (int r = 0; r < kMembers; ++r) {
        threads.emplace_back([&, r] {
          LoopbackGroup group(&hub, r);
          auto sets = parity::MakeSets(group, 0, code_);
          out[r] = sets.ok() ? step(group, *sets, r) : sets.status();
        });
      }
    }
    return out;
  }

  // Member r's parity directory of "sim" and its parity file of version 1.
  std::string ParityDir(int r) const {
    return configs_[r].scratch_dir + (code_ == L3Code::kRs ? "/.rs/sim" : "/.xor/sim");
  }
  std::string ParityPath(int r) const {
    return ParityDir(r) + "/" + format::EntryFileName(format::EntryKind::kCheckpoint, 1);
  }
  // The files in member r's parity directory (a temp file left would show).
  std::vector<std::string> ParityEntries(int r) const {
    std::vector<std::string> names;
    auto list = os::FileSystem::Default()->List(ParityDir(r));
    if (list.ok())
      for (const auto& e : *list) names.push_back(e.name);
    return names;
  }

  const L3Code code_;
  const uint64_t seed_;
  const Sizes sizes_;
  Config configs_[kMembers];
  std::vector<uint8_t> bundles_[kMembers];
};

}  // namespace cairn::test
