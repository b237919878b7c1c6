// Behaviour of cairn::History: push/pop through a small cache, orders, sizes,
// skipped flushes of steps consumed early, prefetching, closing and
// persistent histories.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cairn/cairn.hpp"
#include "os/fs/fs.hpp"
#include "testing/fs/gate_fs.hpp"
#include "testing/test_memory.hpp"
#include "testing/test_util.hpp"

namespace cairn {
namespace {

namespace fs = std::filesystem;
using namespace test;

// This file's data pattern.
constexpr uint64_t kPatternSalt = 0x1234567ull;
std::vector<uint8_t> Pattern(size_t n, uint64_t seed) {
  return SplitMixPattern(n, seed, kPatternSalt);
}

// History step files (h*.cairn) and temp files in dir.
std::vector<std::string> StepFiles(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string n = it->path().filename().string();
    if ((n.size() > 1 && n[0] == 'h') || n.find(".tmp") != std::string::npos) out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string StepFile(int64_t step) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "h%020lld", static_cast<long long>(step));
  return buf;
}

class HistoryTest : public ScratchDirTest {
 protected:
  HistoryTest() : ScratchDirTest("history") {}

  std::unique_ptr<History> OpenHistory(Client& client, const std::string& name) {
    auto r = client.OpenHistory(name);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }

  // Sizes of N steps: includes 0 bytes, 1 byte, block +- 1 and multi-block.
  static std::vector<size_t> StepSizes(size_t n, uint64_t block) {
    const std::vector<size_t> base{0,          1,    block - 1, block, block + 1, 3 * block + 5,
                                   100 * kKiB, 4097, 200 * kKiB};
    std::vector<size_t> out;
    for (size_t i = 0; i < n; ++i) out.push_back(base[i % base.size()]);
    return out;
  }

  // Pops `step` into a buffer one page larger than needed and checks the
  // content and that the slack is untouched.
  void PopAndCheck(History& h, int64_t step, size_t size, uint64_t seed) {
    std::vector<uint8_t> buf(size + 4096, 0xC3);
    auto r = h.Pop(step, buf.data(), buf.size());
    ASSERT_TRUE(r.ok()) << "pop of step " << step << ": " << r.status().ToString();
    EXPECT_EQ(*r, size) << "step " << step;
    EXPECT_TRUE(SameBytes(buf.data(), Pattern(size, seed))) << "step " << step;
    ExpectSlackUntouched(buf, size, step);
  }

  // Bytes from `size` on are still the 0xC3 they were before the pop.
  static void ExpectSlackUntouched(const std::vector<uint8_t>& buf, size_t size, int64_t step) {
    for (size_t i = size; i < buf.size(); ++i) {
      if (buf[i] != 0xC3) {
        ADD_FAILURE() << "pop of step " << step << " wrote past the step's size, at byte " << i;
        break;
      }
    }
  }
};

// The data-path tests run for every memory kind (testing/test_memory.hpp):
// steps are pushed from, and popped into, host, device or managed memory.
class HistoryKindTest : public KindTest<HistoryTest> {
 protected:
  // HistoryTest::PopAndCheck into memory of kind().
  void PopAndCheck(History& h, int64_t step, size_t size, uint64_t seed) {
    TestBuffer buf(kind(), size + 4096);
    buf.Fill(0xC3);
    auto r = h.Pop(step, buf.data(), buf.size());
    ASSERT_TRUE(r.ok()) << "pop of step " << step << ": " << r.status().ToString();
    EXPECT_EQ(*r, size) << "step " << step;
    const std::vector<uint8_t> got = buf.Read();
    EXPECT_TRUE(SameBytes(got.data(), Pattern(size, seed))) << "step " << step;
    ExpectSlackUntouched(got, size, step);
  }
};
INSTANTIATE_TEST_SUITE_P(Kinds, HistoryKindTest, ::testing::ValuesIn(MemoryKindsUnderTest()),
                         MemoryKindTestName);

TEST_P(HistoryKindTest, ReversePopsThroughSmallCache) {
  Config c = MakeConfig(1 * kMiB, 64 * kKiB);
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  auto h = OpenHistory(*client, "adj");
  ASSERT_NE(h, nullptr);
  const auto sizes = StepSizes(27, 64 * kKiB);
  uint64_t total = 0;
  for (size_t s = 0; s < sizes.size(); ++s) {
    TestBuffer data(kind(), Pattern(sizes[s], 500 + s));
    Status st = h->Push(static_cast<int64_t>(s), data.data(), data.size());
    ASSERT_TRUE(st.ok()) << "push " << s << ": " << st.ToString();
    total += sizes[s];
  }
  ASSERT_GT(total, 2 * c.host_cache_bytes);
  for (size_t s = 0; s < sizes.size(); ++s) {
    auto sz = h->StepSize(static_cast<int64_t>(s));
    ASSERT_TRUE(sz.ok()) << sz.status().ToString();
    EXPECT_EQ(*sz, sizes[s]);
  }
  for (size_t i = sizes.size(); i-- > 0;) {
    PopAndCheck(*h, static_cast<int64_t>(i), sizes[i], 500 + i);
    if (HasFatalFailure()) return;
  }
  Stats st = client->GetStats();
  EXPECT_EQ(st.restore.ops, sizes.size());
  EXPECT_EQ(st.restore.bytes, total);
  EXPECT_EQ(st.cache_hits + st.cache_misses, sizes.size());
  EXPECT_EQ(st.failed_flushes, 0u);
  ASSERT_OK(h->Close());
  ASSERT_OK(client->Close());
  EXPECT_TRUE(StepFiles(c.scratch_dir + "/adj").empty()) << Join(StepFiles(c.scratch_dir + "/adj"));
}

TEST_P(HistoryKindTest, RandomOrderPops) {
  const unsigned seed = 20240607;
  SCOPED_TRACE("shuffle seed " + std::to_string(seed));
  Config c = MakeConfig(1 * kMiB, 64 * kKiB);
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  auto h = OpenHistory(*client, "rnd");
  ASSERT_NE(h, nullptr);
  const auto sizes = StepSizes(20, 64 * kKiB);
  for (size_t s = 0; s < sizes.size(); ++s) {
    TestBuffer data(kind(), Pattern(sizes[s], 900 + s));
    // Non-contiguous step numbers.
    ASSERT_OK(h->Push(static_cast<int64_t>(s * 3 + 1), data.data(), data.size()));
  }
  std::vector<size_t> order(sizes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  for (size_t i : order) {
    PopAndCheck(*h, static_cast<int64_t>(i * 3 + 1), sizes[i], 900 + i);
    if (HasFatalFailure()) return;
    // Popped: gone.
    EXPECT_EQ(h->StepSize(static_cast<int64_t>(i * 3 + 1)).status().code(), Code::kNotFound);
  }
  ASSERT_OK(client->Close());
}

TEST_F(HistoryTest, PopErrors) {
  Config c = MakeConfig();
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  auto h = OpenHistory(*client, "err");
  ASSERT_NE(h, nullptr);
  auto data = Pattern(70 * kKiB, 3);
  ASSERT_OK(h->Push(5, data.data(), data.size()));
  ASSERT_OK(h->Push(6, nullptr, 0));

  std::vector<uint8_t> buf(data.size(), 0);
  // Absent steps.
  EXPECT_EQ(h->Pop(4, buf.data(), buf.size()).status().code(), Code::kNotFound);
  EXPECT_EQ(h->StepSize(4).status().code(), Code::kNotFound);
  // Duplicate and bad pushes.
  EXPECT_EQ(h->Push(5, data.data(), data.size()).code(), Code::kExists);
  EXPECT_EQ(h->Push(-1, data.data(), data.size()).code(), Code::kInvalidArgument);
  EXPECT_EQ(h->Push(7, nullptr, 10).code(), Code::kInvalidArgument);

  // Too small a buffer: kSizeMismatch, nothing written, the step stays.
  std::vector<uint8_t> small(data.size() - 1, 0x77);
  auto r = h->Pop(5, small.data(), small.size());
  EXPECT_EQ(r.status().code(), Code::kSizeMismatch) << r.status().ToString();
  EXPECT_TRUE(std::all_of(small.begin(), small.end(), [](uint8_t b) { return b == 0x77; }));
  auto sz = h->StepSize(5);
  ASSERT_TRUE(sz.ok()) << sz.status().ToString();
  EXPECT_EQ(*sz, data.size());
  r = h->Pop(5, buf.data(), buf.size());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, data.size());
  EXPECT_EQ(buf, data);
  // Popped twice: gone.
  EXPECT_EQ(h->Pop(5, buf.data(), buf.size()).status().code(), Code::kNotFound);

  // The empty step pops into no buffer at all.
  auto z = h->StepSize(6);
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(*z, 0u);
  r = h->Pop(6, nullptr, 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, 0u);
  // A step number can be reused once popped.
  EXPECT_OK(h->Push(5, data.data(), 10));
  ASSERT_OK(h->Close());
  // Closed history: kState.
  EXPECT_EQ(h->Push(8, data.data(), 10).code(), Code::kState);
  EXPECT_EQ(h->Pop(5, buf.data(), buf.size()).status().code(), Code::kState);
  EXPECT_OK(h->Close());
}

// Steps popped before their flush started are never written: the flusher is
// held at the creation of step 0's file, steps 1..3 are pushed and popped
// meanwhile, then the flusher is let go.
TEST_P(HistoryKindTest, StepPoppedBeforeFlushIsNeverWritten) {
  GateFs gate(StepFile(0));
  Config c = MakeConfig(4 * kMiB, 64 * kKiB);
  c.fs = &gate;
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  GateRelease release{&gate};
  auto h = OpenHistory(*client, "skip");
  ASSERT_NE(h, nullptr);
  const std::vector<size_t> sizes{100 * kKiB, 200 * kKiB + 3, 0, 64 * kKiB};
  for (size_t s = 0; s < sizes.size(); ++s) {
    TestBuffer data(kind(), Pattern(sizes[s], 40 + s));
    ASSERT_OK(h->Push(static_cast<int64_t>(s), data.data(), data.size()));
    if (s == 0) {
      ASSERT_TRUE(gate.WaitBlocked(std::chrono::seconds(10))) << "the flusher never opened step 0";
    }
  }
  for (size_t s = sizes.size(); s-- > 1;) {
    PopAndCheck(*h, static_cast<int64_t>(s), sizes[s], 40 + s);
  }
  EXPECT_EQ(client->GetStats().cache_hits, sizes.size() - 1);
  gate.Release();
  PopAndCheck(*h, 0, sizes[0], 40);
  // Every step was consumed before (or while) being written; the flusher
  // counts each as skipped once it reaches it.
  EXPECT_TRUE(PollUntil([&] { return client->GetStats().flushes_skipped >= sizes.size() - 1; }))
      << "flushes_skipped = " << client->GetStats().flushes_skipped;
  Stats st = client->GetStats();
  EXPECT_EQ(st.flush_local.ops + st.flushes_skipped, sizes.size());
  ASSERT_OK(h->Close());
  ASSERT_OK(client->Close());
  for (const auto& p : gate.opened()) {
    for (size_t s = 1; s < sizes.size(); ++s) {
      EXPECT_EQ(p.find(StepFile(static_cast<int64_t>(s))), std::string::npos) << "opened " << p;
    }
  }
  EXPECT_TRUE(StepFiles(c.scratch_dir + "/skip").empty())
      << Join(StepFiles(c.scratch_dir + "/skip"));
}

// A history closed while the flusher is about to create a step's file: the
// step is dropped, and that is no error. Deterministic: the flusher is held
// at the creation of the temp file; the directory goes only after that.
TEST_F(HistoryTest, CloseDuringStepFlushIsNoError) {
  GateFs gate(StepFile(0));
  Config c = MakeConfig(1 * kMiB, 64 * kKiB);
  c.fs = &gate;
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  GateRelease release{&gate};
  auto h = OpenHistory(*client, "race");
  ASSERT_NE(h, nullptr);
  auto data = Pattern(100 * kKiB, 1);
  ASSERT_OK(h->Push(0, data.data(), data.size()));
  ASSERT_TRUE(gate.WaitBlocked(std::chrono::seconds(10))) << "the flusher never opened step 0";
  ASSERT_OK(h->Close());
  // The directory is removed in the background, but not while the flusher
  // is about to create a file in it.
  EXPECT_FALSE(gate.WaitDirRemoved(std::chrono::milliseconds(300)))
      << "the history directory was removed under the flusher";
  gate.Release();
  EXPECT_TRUE(gate.WaitDirRemoved(std::chrono::seconds(10)))
      << "the history directory was not removed after the flush ended";
  Status s = client->Close();
  EXPECT_TRUE(s.ok()) << "a dropped history step is reported as a failed flush: " << s.ToString();
  EXPECT_TRUE(StepFiles(c.scratch_dir + "/race").empty())
      << Join(StepFiles(c.scratch_dir + "/race"));
}

// Closing a history must not break a checkpoint of the same name whose flush
// is under way: the shared directory must not be removed under it.
TEST_F(HistoryTest, ClosingHistoryDoesNotBreakCheckpointOfSameName) {
  GateFs gate("v00000000000000000001");
  Config c = MakeConfig(1 * kMiB, 64 * kKiB);
  c.fs = &gate;
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  GateRelease release{&gate};
  auto h = OpenHistory(*client, "mix");
  ASSERT_NE(h, nullptr);
  auto step = Pattern(10 * kKiB, 2);
  ASSERT_OK(h->Push(0, step.data(), step.size()));
  std::vector<uint8_t> region = Pattern(100 * kKiB, 3);
  ASSERT_OK(client->Protect(0, region.data(), region.size()));
  ASSERT_OK(client->Checkpoint("mix", 1));
  // The flusher wrote step 0 (FIFO) and now waits to create version 1's file.
  ASSERT_TRUE(gate.WaitBlocked(std::chrono::seconds(10))) << "the flusher never opened version 1";
  PopAndCheck(*h, 0, step.size(), 2);
  ASSERT_OK(h->Close());
  EXPECT_FALSE(gate.WaitDirRemoved(std::chrono::milliseconds(300)))
      << "the shared directory was removed under the checkpoint's flush";
  gate.Release();
  Status s = client->Wait("mix", 1, Level::kLocal);
  EXPECT_TRUE(s.ok()) << "checkpoint lost because a history of the same name was closed: "
                      << s.ToString();
  (void)client->Close();
  EXPECT_TRUE(fs::exists(c.scratch_dir + "/mix/v00000000000000000001.cairn"));
}

// Weaker property without stalling: everything pushed then popped at once
// through a large cache leaves no file behind, and the flush accounting adds up.
TEST_P(HistoryKindTest, ImmediatePopsLeaveNoFiles) {
  Config c = MakeConfig(4 * kMiB, 64 * kKiB);
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  auto h = OpenHistory(*client, "imm");
  ASSERT_NE(h, nullptr);
  const auto sizes = StepSizes(8, 64 * kKiB);
  for (size_t s = 0; s < sizes.size(); ++s) {
    TestBuffer data(kind(), Pattern(sizes[s], 70 + s));
    ASSERT_OK(h->Push(static_cast<int64_t>(s), data.data(), data.size()));
    PopAndCheck(*h, static_cast<int64_t>(s), sizes[s], 70 + s);
  }
  EXPECT_TRUE(PollUntil([&] {
    Stats st = client->GetStats();
    return st.flush_local.ops + st.flushes_skipped == sizes.size();
  })) << "flushed "
      << client->GetStats().flush_local.ops << " + skipped " << client->GetStats().flushes_skipped;
  ASSERT_OK(h->Close());
  ASSERT_OK(client->Close());
  EXPECT_TRUE(StepFiles(c.scratch_dir + "/imm").empty()) << Join(StepFiles(c.scratch_dir + "/imm"));
}

// The first pop of a restarted persistent history reads its step from the
// file; the prefetcher starts with that pop and loads the next step down,
// never the one the pop is reading (a wasted read, and the step the pop
// consumes under it). Deterministic: the pop is held at the open of its
// file until the prefetcher has opened step 2's, or for 5 s.
TEST_F(HistoryTest, PrefetcherStartsWithTheFirstPopAndSkipsTheStepItReads) {
  Config c = MakeConfig(4 * kMiB, 64 * kKiB);
  c.history_persistent = true;
  const size_t step_bytes = 200 * kKiB;
  {
    auto client = OpenClient(c);
    ASSERT_NE(client, nullptr);
    auto h = OpenHistory(*client, "pr");
    ASSERT_NE(h, nullptr);
    for (int s = 0; s < 4; ++s) {
      auto data = Pattern(step_bytes, 900 + s);
      ASSERT_OK(h->Push(s, data.data(), data.size()));
    }
    ASSERT_OK(h->Close());
    ASSERT_OK(client->Close());
  }
  // Armed after the restart's scan of the history, which may read headers.
  GateFs gate(StepFile(3), /*gate_reads=*/true, /*armed=*/false);
  c.fs = &gate;
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  GateRelease release{&gate};
  auto h = OpenHistory(*client, "pr");
  ASSERT_NE(h, nullptr);
  const size_t opens_at_restart = gate.opened().size();
  auto opens_of = [&](int64_t step) {  // since the restart's scan
    const auto opened = gate.opened();
    size_t n = 0;
    for (size_t i = opens_at_restart; i < opened.size(); ++i) {
      n += opened[i].find(StepFile(step)) != std::string::npos ? 1 : 0;
    }
    return n;
  };
  // Read once: at least the step's data, less than twice it (a file is
  // read by one pass, possibly with several reads in flight, each opening
  // it: counting opens would count those).
  std::vector<uint64_t> scanned(4);
  for (int64_t s = 0; s < 4; ++s) scanned[s] = gate.bytes_read(StepFile(s));
  auto read_once = [&](int64_t step) {
    const uint64_t n = gate.bytes_read(StepFile(step)) - scanned[step];
    return n >= step_bytes && n < 2 * step_bytes;
  };
  gate.Arm();
  bool prefetcher_overlapped = false;
  std::thread releaser([&] {
    prefetcher_overlapped = PollUntil([&] { return opens_of(2) > 0; });
    gate.Release();
  });
  PopAndCheck(*h, 3, step_bytes, 903);
  releaser.join();
  EXPECT_TRUE(prefetcher_overlapped)
      << "the prefetcher did not start while the first pop read its file";
  EXPECT_TRUE(read_once(3)) << "step 3 was read by the pop and prefetched too: "
                            << gate.bytes_read(StepFile(3)) - scanned[3] << " bytes";
  for (int s = 2; s >= 0; --s) PopAndCheck(*h, s, step_bytes, 900 + s);
  // Pops wait for a prefetch in flight and the prefetcher skips a step being
  // popped: no step is read twice, whoever got to it first.
  for (int s = 0; s < 3; ++s) {
    EXPECT_TRUE(read_once(s)) << "step " << s << ": " << gate.bytes_read(StepFile(s)) - scanned[s];
  }
  const Stats st = client->GetStats();
  EXPECT_GE(st.prefetch.ops, 1u);
  EXPECT_EQ(st.cache_hits + st.cache_misses, 4u);
  ASSERT_OK(h->Close());
  ASSERT_OK(client->Close());
}

// With a cache a quarter of the data, reverse pops with some "compute" time
// between them are served by the prefetcher. Gated, not timed: the pops start
// once every step is in its file (nothing dirty: a popped step frees its
// chunks), and each "compute" lasts until the cache holds a step's worth of
// chunks again: below the steps still resident since their push, only the
// prefetcher fills it (the highest missing step first).
TEST_P(HistoryKindTest, PrefetchServesReversePops) {
  Config c = MakeConfig(1 * kMiB, 64 * kKiB);
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  auto h = OpenHistory(*client, "pf");
  ASSERT_NE(h, nullptr);
  constexpr int kSteps = 16;
  const size_t step_bytes = 256 * kKiB;  // 16 x 256 KiB = 4 x the cache
  for (int s = 0; s < kSteps; ++s) {
    TestBuffer data(kind(), Pattern(step_bytes, 300 + s));
    ASSERT_OK(h->Push(s, data.data(), data.size()));
  }
  ASSERT_TRUE(PollUntil([&] {
    const Stats st = client->GetStats();
    return st.flush_local.ops == static_cast<uint64_t>(kSteps) && st.cache_dirty_bytes == 0;
  })) << "not every step reached its file";
  for (int s = kSteps - 1; s >= 0; --s) {
    EXPECT_TRUE(PollUntil([&] { return client->GetStats().cache_used_bytes >= step_bytes; }))
        << "nothing in the cache for the pop of step " << s;
    PopAndCheck(*h, s, step_bytes, 300 + s);
    if (HasFatalFailure()) return;
  }
  Stats st = client->GetStats();
  EXPECT_GT(st.prefetch.bytes, 0u);
  EXPECT_GT(st.prefetch.ops, 0u);
  EXPECT_GT(st.cache_hits, 0u);
  EXPECT_EQ(st.cache_hits + st.cache_misses, static_cast<uint64_t>(kSteps));
  EXPECT_LE(st.prefetch.bytes, uint64_t{kSteps} * step_bytes);
  ASSERT_OK(client->Close());
}

// A step larger than the whole cache streams out and is read back from its file.
TEST_P(HistoryKindTest, StepLargerThanCache) {
  Config c = MakeConfig(1 * kMiB, 64 * kKiB);
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  auto h = OpenHistory(*client, "huge");
  ASSERT_NE(h, nullptr);
  const size_t big = 3 * kMiB + 123;
  TestBuffer d0(kind(), Pattern(big, 1)), d1(kind(), Pattern(1000, 2)), d2(kind(), Pattern(big, 3));
  ASSERT_OK(h->Push(0, d0.data(), d0.size()));
  ASSERT_OK(h->Push(1, d1.data(), d1.size()));
  ASSERT_OK(h->Push(2, d2.data(), d2.size()));
  PopAndCheck(*h, 2, big, 3);
  PopAndCheck(*h, 1, 1000, 2);
  PopAndCheck(*h, 0, big, 1);
  ASSERT_OK(client->Close());
  EXPECT_TRUE(StepFiles(c.scratch_dir + "/huge").empty())
      << Join(StepFiles(c.scratch_dir + "/huge"));
}

// A history and a checkpoint may share a name (and directory): closing the
// history removes its steps only.
TEST_F(HistoryTest, HistoryBesideCheckpointsOfTheSameName) {
  Config c = MakeConfig(1 * kMiB, 64 * kKiB);
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  std::vector<uint8_t> region = Pattern(100 * kKiB, 9);
  ASSERT_OK(client->Protect(0, region.data(), region.size()));
  ASSERT_OK(client->Checkpoint("shared", 1));
  ASSERT_OK(client->Wait("shared", 1, Level::kLocal));
  auto h = OpenHistory(*client, "shared");
  ASSERT_NE(h, nullptr);
  for (int s = 0; s < 12; ++s) {
    auto data = Pattern(128 * kKiB, 50 + s);
    ASSERT_OK(h->Push(s, data.data(), data.size()));
  }
  PopAndCheck(*h, 11, 128 * kKiB, 61);
  ASSERT_OK(h->Close());
  ASSERT_OK(client->Close());
  const std::string dir = c.scratch_dir + "/shared";
  EXPECT_TRUE(StepFiles(dir).empty()) << Join(StepFiles(dir));
  EXPECT_TRUE(fs::exists(dir + "/v00000000000000000001.cairn"));
  auto again = OpenClient(c);
  ASSERT_NE(again, nullptr);
  std::fill(region.begin(), region.end(), 0);
  ASSERT_OK(again->Protect(0, region.data(), region.size()));
  auto latest = again->Latest("shared");
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(*latest, 1);
  ASSERT_OK(again->Restore("shared", 1));
  EXPECT_EQ(region, Pattern(region.size(), 9));
}

TEST_F(HistoryTest, CloseRemovesStepFiles) {
  Config c = MakeConfig(1 * kMiB, 64 * kKiB);
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  auto h = OpenHistory(*client, "cls");
  ASSERT_NE(h, nullptr);
  const std::string dir = c.scratch_dir + "/cls";
  for (int s = 0; s < 12; ++s) {
    auto data = Pattern(128 * kKiB, s);
    ASSERT_OK(h->Push(s, data.data(), data.size()));
  }
  // 12 x 128 KiB through a 1 MiB cache: some steps are in files now.
  ASSERT_TRUE(PollUntil([&] {
    for (const auto& f : StepFiles(dir)) {
      if (f.find(".tmp") == std::string::npos) return true;
    }
    return false;
  })) << "no step file was written: "
      << Join(StepFiles(dir));
  ASSERT_OK(h->Close());
  EXPECT_OK(h->Close());  // idempotent
  EXPECT_EQ(h->StepSize(0).status().code(), Code::kState);
  EXPECT_TRUE(PollUntil([&] { return StepFiles(dir).empty(); })) << Join(StepFiles(dir));
  // The name can be opened again, empty.
  auto again = OpenHistory(*client, "cls");
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->StepSize(0).status().code(), Code::kNotFound);
  ASSERT_OK(again->Close());
  // Close() may report a dropped step's flush error here: see CloseDuringStepFlushIsNoError.
  (void)client->Close();
  EXPECT_TRUE(StepFiles(dir).empty()) << Join(StepFiles(dir));
}

// Client::Close with a history still open drops it and its files too.
TEST_F(HistoryTest, ClientCloseDropsOpenHistory) {
  Config c = MakeConfig(1 * kMiB, 64 * kKiB);
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  auto h = OpenHistory(*client, "open");
  ASSERT_NE(h, nullptr);
  for (int s = 0; s < 12; ++s) {
    auto data = Pattern(128 * kKiB, s);
    ASSERT_OK(h->Push(s, data.data(), data.size()));
  }
  // Close() may report a dropped step's flush error here: see CloseDuringStepFlushIsNoError.
  (void)client->Close();
  EXPECT_EQ(h->Push(100, "x", 1).code(), Code::kState);
  EXPECT_OK(h->Close());
  EXPECT_TRUE(StepFiles(c.scratch_dir + "/open").empty())
      << Join(StepFiles(c.scratch_dir + "/open"));
}

TEST_P(HistoryKindTest, PersistentHistorySurvivesRestart) {
  Config c = MakeConfig(1 * kMiB, 64 * kKiB);
  c.history_persistent = true;
  const std::string dir = c.scratch_dir + "/ph";
  const auto sizes = StepSizes(7, 64 * kKiB);
  {
    auto client = OpenClient(c);
    ASSERT_NE(client, nullptr);
    auto h = OpenHistory(*client, "ph");
    ASSERT_NE(h, nullptr);
    for (size_t s = 0; s < sizes.size(); ++s) {
      TestBuffer data(kind(), Pattern(sizes[s], 800 + s));
      ASSERT_OK(h->Push(static_cast<int64_t>(s), data.data(), data.size()));
    }
    ASSERT_OK(h->Close());
    ASSERT_OK(client->Close());
  }
  std::vector<std::string> want;
  for (size_t s = 0; s < sizes.size(); ++s)
    want.push_back(StepFile(static_cast<int64_t>(s)) + ".cairn");
  EXPECT_EQ(StepFiles(dir), want) << Join(StepFiles(dir));

  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  auto h = OpenHistory(*client, "ph");
  ASSERT_NE(h, nullptr);
  for (size_t s = 0; s < sizes.size(); ++s) {
    auto sz = h->StepSize(static_cast<int64_t>(s));
    ASSERT_TRUE(sz.ok()) << "step " << s << ": " << sz.status().ToString();
    EXPECT_EQ(*sz, sizes[s]);
  }
  for (size_t s = sizes.size(); s-- > 0;) {
    PopAndCheck(*h, static_cast<int64_t>(s), sizes[s], 800 + s);
  }
  Stats st = client->GetStats();
  EXPECT_EQ(st.cache_hits + st.cache_misses, sizes.size());
  EXPECT_EQ(st.restore.ops, sizes.size());
  ASSERT_OK(h->Close());
  ASSERT_OK(client->Close());
  EXPECT_TRUE(StepFiles(dir).empty()) << Join(StepFiles(dir));
}

// Step files left by an ephemeral history (e.g. after a crash) are scratch
// data: a new ephemeral history of the same name drops them.
TEST_F(HistoryTest, EphemeralHistoryDropsLeftoverSteps) {
  Config c = MakeConfig(1 * kMiB, 64 * kKiB);
  c.history_persistent = true;
  const std::string dir = c.scratch_dir + "/left";
  {
    auto client = OpenClient(c);
    ASSERT_NE(client, nullptr);
    auto h = OpenHistory(*client, "left");
    ASSERT_NE(h, nullptr);
    auto data = Pattern(10 * kKiB, 1);
    ASSERT_OK(h->Push(0, data.data(), data.size()));
    ASSERT_OK(h->Push(1, data.data(), data.size()));
    ASSERT_OK(h->Close());
    ASSERT_OK(client->Close());
  }
  ASSERT_EQ(StepFiles(dir).size(), 2u) << Join(StepFiles(dir));
  c.history_persistent = false;
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  auto h = OpenHistory(*client, "left");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->StepSize(0).status().code(), Code::kNotFound);
  ASSERT_OK(h->Close());
  ASSERT_OK(client->Close());
  EXPECT_TRUE(StepFiles(dir).empty()) << Join(StepFiles(dir));
}

}  // namespace
}  // namespace cairn
