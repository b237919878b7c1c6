// The streamed L3 encoding (xor_encode.cpp) on a set of four in-process
// members (test::LoopbackGroup, one thread each): every parity file is what
// docs/format.md 3.9 defines from the whole bundles, a member that fails
// mid-stream (a read, a full disk) leaves no parity file on any member, and
// a rebuilt member's parity encoded again (Reencode) is the lost one.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "cairn/cairn.hpp"
#include "format/le.hpp"
#include "format/naming.hpp"
#include "os/fs/fs.hpp"
#include "redundancy/bundle_stream.hpp"
#include "redundancy/parity/parity_set_test_util.hpp"
#include "redundancy/parity/xor_parity.hpp"
#include "redundancy/parity/xor_parity_impl.hpp"
#include "redundancy/redundancy.hpp"
#include "testing/fs/fault_fs.hpp"
#include "testing/group/fake_checkpoints.hpp"
#include "testing/test_util.hpp"
#include "util/crc32c.hpp"

namespace cairn {
namespace {

using namespace test;

class XorEncodeTest : public ParitySetTest {
 protected:
  explicit XorEncodeTest(const Sizes& sizes = kSmall)
      : ParitySetTest("xor_encode", L3Code::kXor, 7, sizes) {}

  std::vector<Result<uint64_t>> EncodeAll() {
    return OnEveryMember<uint64_t>([&](Group& group, const parity::Sets& sets, int r) {
      return parity::Encode(group, sets, configs_[r], "sim", 1, nullptr,
                            caches_ != nullptr ? &caches_[r] : nullptr);
    });
  }
  // P_j = XOR over p != j of chunk ChunkOf(j, p) of bundle p, zero-padded,
  // in every member's parity file, with the header's sizes and CRCs.
  void ExpectEachParityIsTheXorOfTheChunks() {
    for (const auto& r : EncodeAll()) ASSERT_TRUE(r.ok()) << r.status().ToString();
    const std::vector<int> members = {0, 1, 2, 3};
    size_t longest = 0;
    for (const auto& b : bundles_) longest = std::max(longest, b.size());
    const uint64_t c = (longest + kMembers - 2) / (kMembers - 1);
    ASSERT_GT(c, 2 * parity::impl::WindowOf(c)) << "the encoding streams several rounds";
    for (int j = 0; j < kMembers; ++j) {
      auto file = os::FileSystem::Default()->Open(ParityPath(j), os::OpenOptions{});
      ASSERT_TRUE(file.ok()) << file.status().ToString();
      auto h = parity::impl::ReadHeader(**file, ParityPath(j), SetOf(members, j));
      ASSERT_TRUE(h.ok()) << h.status().ToString();
      EXPECT_EQ(h->chunk, c);
      EXPECT_EQ(h->position, static_cast<uint32_t>(j));
      for (int q = 0; q < kMembers; ++q) {
        EXPECT_EQ(h->members[q].bytes, static_cast<int64_t>(bundles_[q].size()));
        EXPECT_EQ(h->members[q].crc, crc32c::Value(bundles_[q].data(), bundles_[q].size())) << q;
      }
      std::vector<uint8_t> want(c, 0);
      for (int p = 0; p < kMembers; ++p) {
        if (p == j) continue;
        const uint64_t off = parity::impl::ChunkOf(j, p, kMembers) * c;
        for (uint64_t i = 0; i < c && off + i < bundles_[p].size(); ++i) want[i] ^= bundles_[p][off + i];
      }
      std::vector<uint8_t> all(h->Size() + c + parity::impl::kCrc);
      ASSERT_TRUE((*file)->ReadAt(all.data(), all.size(), 0).ok());
      EXPECT_EQ(std::memcmp(all.data() + h->Size(), want.data(), c), 0)
          << "member " << j << "'s parity chunk";
      EXPECT_EQ(format::le::Get32(&all[h->Size() + c]), crc32c::Value(all.data(), h->Size() + c));
      EXPECT_EQ(ParityEntries(j).size(), 1u);
    }
  }
  FakeCheckpoints* caches_ = nullptr;  // each member's host cache, or none

  // The XOR set of `members` as member `position` sees it.
  static parity::Sets SetOf(const std::vector<int>& members, int position) {
    return parity::Sets{.all = {members}, .mine = 0, .position = position};
  }
};

TEST_F(XorEncodeTest, EachParityIsTheXorOfTheWholeBundlesChunks) {
  ExpectEachParityIsTheXorOfTheChunks();
}

// A member's own windows come from its host cache where it holds them
// (Checkpoints::CopyCached): each member's cache holds its file as
// committed, and the file's data on disk is then spoiled; the parity is
// still the committed bundles'.
TEST_F(XorEncodeTest, OwnWindowsComeFromTheHostCache) {
  FakeCheckpoints caches[kMembers];
  std::vector<uint8_t> committed[kMembers];
  for (int r = 0; r < kMembers; ++r) {
    const std::string path = configs_[r].scratch_dir + "/sim/" +
                             format::EntryFileName(format::EntryKind::kCheckpoint, 1);
    committed[r] = Slurp(path);
    ASSERT_GT(committed[r].size(), 4096u + 16 * kKiB);
    std::FILE* f = std::fopen(path.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    const std::vector<uint8_t> junk(16 * kKiB, 0x5a);  // inside the first block's data
    ASSERT_EQ(std::fseek(f, 4096, SEEK_SET), 0);
    ASSERT_EQ(std::fwrite(junk.data(), 1, junk.size(), f), junk.size());
    ASSERT_EQ(std::fclose(f), 0);
    caches[r].copy_cached = [&committed, r](const std::string&, int64_t, uint64_t offset,
                                            uint64_t bytes, uint8_t* dst) -> ExtentList {
      std::memcpy(dst, committed[r].data() + offset, bytes);
      return {};
    };
  }
  caches_ = caches;
  ExpectEachParityIsTheXorOfTheChunks();
}

// A chunk longer than a row's write: each parity row is written in several
// pieces (of whole windows), and it is the same XOR.
class XorEncodeLargeTest : public XorEncodeTest {
 protected:
  XorEncodeLargeTest() : XorEncodeTest(kLarge) {}
};

TEST_F(XorEncodeLargeTest, ARowWrittenInSeveralPiecesIsTheSameXor) {
  const uint64_t c = (kLarge[1] + kMembers - 2) / (kMembers - 1);
  ASSERT_GT(c, parity::impl::kRowWriteBytes) << "each row goes out in several writes";
  ExpectEachParityIsTheXorOfTheChunks();
}

// After a rebuild the lost member's own parity is encoded again from the
// others' bundles (Reencode): the same file, byte for byte, and nothing
// kept when a survivor cannot read its file.
TEST_F(XorEncodeTest, ReencodeGivesTheLostMembersParityBack) {
  for (const auto& r : EncodeAll()) ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::vector<uint8_t> before = Slurp(ParityPath(1));
  ASSERT_FALSE(before.empty());
  const std::vector<int> members = {0, 1, 2, 3};
  for (bool survivor_fails : {false, true}) {
    ASSERT_TRUE(os::FileSystem::Default()->Remove(ParityPath(1)).ok());
    // The survivors' parity headers and bundles, as the rebuild had them
    // (opened here: a survivor that could not would leave the set waiting).
    FaultFs fault;
    configs_[0].fs = &fault;  // its chunk that member 1 holds is data, not padding
    std::vector<parity::impl::Header> headers(kMembers);
    std::vector<std::unique_ptr<redundancy::BundleReader>> bundles(kMembers);
    for (int r : {0, 2, 3}) {
      auto file = os::FileSystem::Default()->Open(ParityPath(r), os::OpenOptions{});
      ASSERT_TRUE(file.ok()) << file.status().ToString();
      auto h = parity::impl::ReadHeader(**file, ParityPath(r), SetOf(members, r));
      ASSERT_TRUE(h.ok()) << h.status().ToString();
      headers[r] = *h;
      auto bundle = redundancy::BundleReader::Open(configs_[r], configs_[r].scratch_dir, "sim", 1);
      ASSERT_TRUE(bundle.ok()) << bundle.status().ToString();
      bundles[r] = std::move(*bundle);
    }
    if (survivor_fails) fault.Inject({.op = FaultOp::kRead, .err = EIO, .nth = 2, .path_filter = "/sim/"});
    const auto out = OnEveryMember<uint64_t>([&](Group& group, const parity::Sets& sets, int r) {
      return r == 1 ? parity::impl::Reencode(group, sets, configs_[r], "sim", 1, {1}, nullptr,
                                             nullptr, true)
                    : parity::impl::Reencode(group, sets, configs_[r], "sim", 1, {1}, &headers[r],
                                             bundles[r].get(), true);
    });
    configs_[0].fs = nullptr;
    if (!survivor_fails) {
      for (int r = 0; r < kMembers; ++r) ASSERT_TRUE(out[r].ok()) << r << ": " << out[r].status().ToString();
      EXPECT_EQ(out[1].value(), before.size());
      EXPECT_EQ(Slurp(ParityPath(1)), before) << "the parity encoded again differs";
    } else {
      EXPECT_FALSE(out[0].ok());
      ASSERT_FALSE(out[1].ok());
      EXPECT_NE(out[1].status().message().find("rank 0 could not read its file"), std::string::npos)
          << out[1].status().ToString();
      EXPECT_TRUE(ParityEntries(1).empty()) << "kept " << ParityEntries(1)[0];
    }
  }
}

// Member 2's stream fails in the middle (its second window's write, then
// its second read): every member fails, member 2 with its own error, the
// others naming rank 2, and no member keeps a parity file or a temp file.
// An encoding that fell behind retention: one member already removed the
// version and committed a newer one. The whole set skips it (0 on every
// member, no parity anywhere); a member that merely lost the file fails it.
TEST_F(XorEncodeTest, AVersionRetentionRemovedIsSkippedByTheWholeSet) {
  const std::string v1 =
      format::EntryPath(configs_[2].scratch_dir, "sim", format::EntryKind::kCheckpoint, 1);
  const std::string v2 =
      format::EntryPath(configs_[2].scratch_dir, "sim", format::EntryKind::kCheckpoint, 2);
  ASSERT_EQ(std::rename(v1.c_str(), v2.c_str()), 0);  // v1 gone, a newer one there
  auto skipped = EncodeAll();
  for (int r = 0; r < kMembers; ++r) {
    ASSERT_TRUE(skipped[r].ok()) << r << ": " << skipped[r].status().ToString();
    EXPECT_EQ(*skipped[r], 0u) << r;
    EXPECT_TRUE(ParityEntries(r).empty()) << r;
  }
  ASSERT_EQ(std::rename(v2.c_str(), v1.c_str()), 0);
  ASSERT_EQ(std::remove(v1.c_str()), 0);  // gone, and nothing newer: not retention's doing
  const auto out = EncodeAll();
  for (int r = 0; r < kMembers; ++r) {
    EXPECT_FALSE(out[r].ok()) << r;
    EXPECT_TRUE(ParityEntries(r).empty()) << r;
  }
}

TEST_F(XorEncodeTest, AFullDiskMidStreamOnOneMemberLeavesNoParityAnywhere) {
  FaultFs fault;
  configs_[2].fs = &fault;
  // Room for the first window only (the header goes last).
  fault.SetWriteBudget(parity::impl::WindowOf((bundles_[2].size() + 2) / 3) + 100, "/.xor/");
  const auto out = EncodeAll();
  for (int r = 0; r < kMembers; ++r) {
    ASSERT_FALSE(out[r].ok()) << r;
    EXPECT_EQ(out[r].status().code(), Code::kNoSpace) << out[r].status().ToString();
    EXPECT_NE(out[r].status().message().find(r == 2 ? ".xor/sim" : "rank 2 of this rank's set"),
              std::string::npos)
        << out[r].status().ToString();
    EXPECT_TRUE(ParityEntries(r).empty()) << "member " << r << " kept " << ParityEntries(r)[0];
  }
  EXPECT_GE(fault.faults_fired(), 1u);
}

TEST_F(XorEncodeTest, AFailedReadMidStreamOnOneMemberLeavesNoParityAnywhere) {
  FaultFs fault;
  configs_[2].fs = &fault;
  {  // The reads that opening the bundle makes; the next ones stream it.
    auto open = redundancy::BundleReader::Open(configs_[2], configs_[2].scratch_dir, "sim", 1);
    ASSERT_TRUE(open.ok()) << open.status().ToString();
  }
  const uint64_t opening = fault.calls(FaultOp::kRead);
  fault.Reset();
  fault.Inject({.op = FaultOp::kRead, .err = EIO, .nth = opening + 2, .path_filter = "/sim/"});
  const auto out = EncodeAll();
  for (int r = 0; r < kMembers; ++r) {
    ASSERT_FALSE(out[r].ok()) << r;
    EXPECT_EQ(out[r].status().code(), Code::kIo) << out[r].status().ToString();
    if (r != 2) {
      EXPECT_NE(out[r].status().message().find("rank 2 of this rank's set"), std::string::npos);
    }
    EXPECT_TRUE(ParityEntries(r).empty()) << "member " << r;
  }
  EXPECT_EQ(fault.faults_fired(), 1u);
}

}  // namespace
}  // namespace cairn
