// Four in-process members (test::LoopbackGroup, one thread each), each with
// a chain of "ckpt" in its own directory (v1 full, v2 and v3 layered on it;
// test::ChainFiles) of a different size, so that their bundles span
// different numbers of windows: the fixture of the tests that move bundles
// between members (bundle exchange, the partner level).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "cairn/config.hpp"
#include "cairn/group.hpp"
#include "format/naming.hpp"
#include "os/fs/fs.hpp"
#include "testing/chain_files.hpp"
#include "testing/group/loopback_group.hpp"
#include "testing/test_util.hpp"

namespace cairn::test {

class MemberChainsTest : public ScratchDirTest {
 protected:
  static constexpr int kMembers = 4;
  static constexpr uint64_t kBytes[kMembers] = {300 * kKiB + 5, 64 * kKiB, 1 * kMiB + 3,
                                                200 * kKiB};

  explicit MemberChainsTest(const std::string& stem) : ScratchDirTest(stem) {}

  void SetUp() override {
    ScratchDirTest::SetUp();
    for (int r = 0; r < kMembers; ++r) {
      configs_[r] = MakeConfig();
      configs_[r].scratch_dir += "/m" + std::to_string(r);
      ChainFiles chain{
          .fs = os::FileSystem::Default(), .dir = configs_[r].scratch_dir, .bytes = kBytes[r]};
      chain.WriteChain(1, 2);
    }
  }

  // step(group, r) -> R on every member at once, over `hub`.
  template <typename R, typename Step>
  std::vector<R> OnEveryMember(LoopbackHub& hub, const Step& step) {
    std::vector<R> out(kMembers, R(Status::Internal("not run")));
    std::vector<std::jthread> threads;
    for (int r = 0; r < kMembers; ++r) {
      threads.emplace_back([&, r] {
        LoopbackGroup group(&hub, r);
        out[r] = step(group, r);
      });
    }
    threads.clear();
    return out;
  }

  // Member r's own directory of "ckpt".
  std::string Own(int r) const { return configs_[r].scratch_dir + "/ckpt"; }
  static std::string File(int64_t v) {
    return "/" + format::EntryFileName(format::EntryKind::kCheckpoint, v);
  }
  // Directories a and b hold the same v1..v3 of "ckpt", byte for byte.
  static void ExpectSameChain(const std::string& a, const std::string& b) {
    for (int64_t v = 1; v <= 3; ++v) {
      const std::vector<uint8_t> want = Slurp(a + File(v));
      ASSERT_FALSE(want.empty()) << a << File(v);
      EXPECT_TRUE(Slurp(b + File(v)) == want) << b << File(v);
    }
  }
  static std::vector<std::string> Entries(const std::string& dir) {
    std::vector<std::string> names;
    auto list = os::FileSystem::Default()->List(dir);
    if (list.ok())
      for (const auto& e : *list) names.push_back(e.name);
    return names;
  }

  Config configs_[kMembers];
};

}  // namespace cairn::test
