#include "capture/changes.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <vector>

#include "capture/copy_engine.hpp"

namespace cairn::core {
namespace {

constexpr uint64_t kChunk = 64 << 10;

std::vector<uint8_t> Random(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

std::unique_ptr<ChangeDetector> Make(ChangeDetection mode, int max_layers = 10,
                                     std::unique_ptr<PageSource> pages = nullptr, AutoPolicy policy = {}) {
  ChangeOptions o{.mode = mode, .max_layers = max_layers, .hash_chunk = kChunk, .policy = policy};
  auto d = MakeChangeDetector(o, std::move(pages));
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return std::move(*d);
}

ChangeSet Detect(ChangeDetector& d, int64_t version, const std::vector<uint8_t>& data) {
  auto r = d.Detect(version, data.data(), data.size());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : ChangeSet{};
}

void ExpectLayered(const ChangeSet& cs, int64_t base, uint32_t depth, const ExtentList& changed) {
  EXPECT_FALSE(cs.full);
  EXPECT_EQ(cs.base, base);
  EXPECT_EQ(cs.depth, depth);
  EXPECT_EQ(cs.changed, changed);
}

void ExpectFull(const ChangeSet& cs, uint64_t bytes) {
  EXPECT_TRUE(cs.full);
  EXPECT_EQ(cs.depth, 0u);
  ExtentList all;
  AppendExtent(all, 0, bytes);
  EXPECT_EQ(cs.changed, all);
}

TEST(HashChunks, OneChangedByteAnywhereIsItsChunk) {
  // 3.5 chunks: the last one is partial.
  const uint64_t bytes = 3 * kChunk + kChunk / 2;
  auto data = Random(bytes, 1);
  const auto before = HashChunks(data.data(), bytes, kChunk, nullptr);
  ASSERT_EQ(before.size(), 4u);
  const std::pair<uint64_t, Extent> cases[] = {
      {0, {0, kChunk}},                                  // first byte
      {kChunk - 1, {0, kChunk}},                         // last byte of a chunk
      {kChunk, {kChunk, kChunk}},                        // first of the next
      {3 * kChunk, {3 * kChunk, kChunk / 2}},            // first of the partial chunk
      {bytes - 1, {3 * kChunk, kChunk / 2}},             // the very last byte
  };
  for (const auto& [at, want] : cases) {
    auto changed = data;
    changed[at] ^= 1;
    const auto now = HashChunks(changed.data(), bytes, kChunk, nullptr);
    EXPECT_EQ(DiffChunks(before, now, kChunk, bytes), (ExtentList{want})) << "byte " << at;
  }
  EXPECT_TRUE(DiffChunks(before, HashChunks(data.data(), bytes, kChunk, nullptr), kChunk, bytes).empty());
}

TEST(HashChunks, AdjacentChangedChunksMerge) {
  const uint64_t bytes = 6 * kChunk;
  auto data = Random(bytes, 2);
  const auto before = HashChunks(data.data(), bytes, kChunk, nullptr);
  for (uint64_t c : {1, 2, 4}) data[c * kChunk + 7] ^= 0x80;
  const auto now = HashChunks(data.data(), bytes, kChunk, nullptr);
  EXPECT_EQ(DiffChunks(before, now, kChunk, bytes), (ExtentList{{kChunk, 2 * kChunk}, {4 * kChunk, kChunk}}));
}

TEST(HashChunks, ParallelOnTheCopyEngineEqualsSerial) {
  CopyEngine engine(2);
  for (uint64_t chunk : {kChunk, uint64_t{12 << 10}}) {
    const uint64_t bytes = (8 << 20) + 4097;  // a partial last chunk
    auto data = Random(bytes, 3);
    const auto serial = HashChunks(data.data(), bytes, chunk, nullptr);
    const auto parallel = HashChunks(data.data(), bytes, chunk, &engine);
    ASSERT_EQ(serial.size(), (bytes + chunk - 1) / chunk);
    EXPECT_EQ(serial, parallel) << "chunk " << chunk;
  }
}

// A region held in pieces (its blocks in the host cache) hashes like the
// same bytes in one range; a piece that splits a chunk is refused.
TEST(HashChunks, PiecesEqualOneRange) {
  CopyEngine engine(1);
  const uint64_t bytes = 40 * kChunk + 100;
  auto data = Random(bytes, 14);
  const RegionPiece pieces[] = {{data.data(), 16 * kChunk}, {data.data() + 16 * kChunk, 16 * kChunk},
                                {data.data() + 32 * kChunk, 8 * kChunk + 100}};
  auto hashed = HashChunks(pieces, kChunk, &engine);
  ASSERT_TRUE(hashed.ok()) << hashed.status().ToString();
  EXPECT_EQ(*hashed, HashChunks(data.data(), bytes, kChunk, nullptr));
  const RegionPiece bad[] = {{data.data(), kChunk + 1}, {data.data() + kChunk + 1, kChunk}};
  auto r = HashChunks(bad, kChunk, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("not a multiple of the hash chunk"), std::string::npos);

  auto d = Make(ChangeDetection::kHash);
  ASSERT_TRUE(d->DetectPieces(1, pieces).ok());
  d->Accept(1);
  data[20 * kChunk] ^= 1;
  auto cs = d->Detect(2, data.data(), bytes);  // the same region in one range
  ASSERT_TRUE(cs.ok());
  ExpectLayered(*cs, 1, 1, {{20 * kChunk, kChunk}});
  EXPECT_EQ(d->DetectPieces(3, bad).status().code(), Code::kInvalidArgument);
}

TEST(CopyEngineForEach, PartsCoverEveryItemOnce) {
  CopyEngine engine(3);
  for (size_t items : {size_t{0}, size_t{1}, size_t{5}, size_t{1000}, size_t{4099}}) {
    std::vector<std::atomic<int>> seen(items);
    engine.ForEach(items, 1, 4, [&](size_t b, size_t e) {
      EXPECT_TRUE(b % 4 == 0 || b == items);
      for (size_t i = b; i < e; ++i) seen[i].fetch_add(1);
    });
    for (size_t i = 0; i < items; ++i) EXPECT_EQ(seen[i].load(), 1) << i << " of " << items;
  }
}

TEST(UnionExtents, MergesOverlappingAndTouching) {
  EXPECT_EQ(UnionExtents({{0, 10}, {30, 5}}, {{5, 10}, {35, 1}, {50, 1}}),
            (ExtentList{{0, 15}, {30, 6}, {50, 1}}));
  EXPECT_EQ(UnionExtents({}, {{1, 1}}), (ExtentList{{1, 1}}));
}

TEST(ChangeDetector, FullModeAlwaysStoresEverything) {
  auto d = Make(ChangeDetection::kFull);
  auto data = Random(3 * kChunk, 4);
  for (int64_t v = 1; v <= 3; ++v) {
    ExpectFull(Detect(*d, v, data), data.size());
    d->Accept(v);
  }
  EXPECT_STREQ(d->name(), "full");
  EXPECT_EQ(d->counters().bytes_changed, 3 * data.size());
  EXPECT_EQ(d->counters().bytes_hashed, 0u);
}

TEST(ChangeDetector, HashIsLayeredOnThePreviousCapture) {
  auto d = Make(ChangeDetection::kHash);
  auto data = Random(4 * kChunk, 5);
  ExpectFull(Detect(*d, 1, data), data.size());
  data[2 * kChunk] ^= 1;
  // Version 1 is still in flight: 2 is layered on it all the same.
  ExpectLayered(Detect(*d, 2, data), 1, 1, {{2 * kChunk, kChunk}});
  d->Accept(1);
  d->Accept(2);
  data[kChunk + 3] ^= 1;
  ExpectLayered(Detect(*d, 3, data), 2, 2, {{kChunk, kChunk}});
  d->Accept(3);
  ExpectLayered(Detect(*d, 4, data), 3, 3, {});  // nothing changed
  d->Accept(1);  // an older version committing late does not move the baseline back
  data[0] ^= 1;
  ExpectLayered(Detect(*d, 5, data), 4, 4, {{0, kChunk}});
  EXPECT_STREQ(d->name(), "hash");
  EXPECT_EQ(d->counters().bytes_hashed, 5 * data.size());
  EXPECT_EQ(d->counters().layered, 4u);
}

TEST(ChangeDetector, AbandonedVersionsNeverBecomeTheBaseline) {
  auto d = Make(ChangeDetection::kHash);
  auto data = Random(4 * kChunk, 6);
  Detect(*d, 1, data);
  d->Accept(1);
  data[kChunk] ^= 1;  // A
  ExpectLayered(Detect(*d, 2, data), 1, 1, {{kChunk, kChunk}});
  d->Abandon(2);
  d->Accept(2);  // ignored: it failed
  data[3 * kChunk] ^= 1;  // B
  // Relative to version 1, which lacks A: both chunks are stored.
  ExpectLayered(Detect(*d, 3, data), 1, 1, {{kChunk, kChunk}, {3 * kChunk, kChunk}});
}

TEST(ChangeDetector, VersionsInFlightAreRelativeToThePreviousCapture) {
  auto d = Make(ChangeDetection::kHash);
  auto data = Random(4 * kChunk, 7);
  Detect(*d, 1, data);
  d->Accept(1);
  data[0] ^= 1;
  ExpectLayered(Detect(*d, 2, data), 1, 1, {{0, kChunk}});
  data[2 * kChunk] ^= 1;
  // 2 is still in flight: 3 is layered on it and stores only its own change.
  ExpectLayered(Detect(*d, 3, data), 2, 2, {{2 * kChunk, kChunk}});
  d->Accept(2);
  d->Accept(3);
  data[3 * kChunk] ^= 1;
  ExpectLayered(Detect(*d, 4, data), 3, 3, {{3 * kChunk, kChunk}});
}

// A failed version in flight takes the versions layered on it down with it
// (the pipeline fails them): the next one is relative to the newest version
// still standing, and stores everything changed since.
TEST(ChangeDetector, AVersionLayeredOnAnAbandonedOneIsNeverABase) {
  auto d = Make(ChangeDetection::kHash);
  auto data = Random(4 * kChunk, 17);
  Detect(*d, 1, data);
  d->Accept(1);
  data[0] ^= 1;
  ExpectLayered(Detect(*d, 2, data), 1, 1, {{0, kChunk}});
  data[kChunk] ^= 1;
  ExpectLayered(Detect(*d, 3, data), 2, 2, {{kChunk, kChunk}});
  data[2 * kChunk] ^= 1;
  ExpectLayered(Detect(*d, 4, data), 3, 3, {{2 * kChunk, kChunk}});
  d->Abandon(3);  // 4 is doomed with it; 2 still stands
  d->Accept(4);   // ignored: it cannot have committed
  data[3 * kChunk] ^= 1;
  ExpectLayered(Detect(*d, 5, data), 2, 2, {{kChunk, 3 * kChunk}});
  d->Abandon(2);  // 5 too: back to 1
  ExpectLayered(Detect(*d, 6, data), 1, 1, {{0, 4 * kChunk}});
  d->Accept(6);
  ExpectLayered(Detect(*d, 7, data), 6, 2, {});
}

TEST(ChangeDetector, ResetForcesAFullVersionAndForgetsPendingOnes) {
  auto d = Make(ChangeDetection::kHash);
  auto data = Random(2 * kChunk, 8);
  Detect(*d, 1, data);
  d->Accept(1);
  Detect(*d, 2, data);
  d->Reset();
  d->Accept(2);  // detected before the reset: ignored
  ExpectFull(Detect(*d, 3, data), data.size());
  ExpectLayered(Detect(*d, 4, data), 3, 1, {});
  d->Accept(4);  // 3, captured before it, is forgotten
  ExpectLayered(Detect(*d, 5, data), 4, 2, {});
}

// Flushes failing for a long time: the results in flight are bounded, and
// after the bound the next version is full and starts a new chain.
TEST(ChangeDetector, ResultsInFlightAreBounded) {
  auto d = Make(ChangeDetection::kHash, /*max_layers=*/1000);
  auto data = Random(2 * kChunk, 18);
  Detect(*d, 0, data);
  int64_t v = 1;
  for (; v < 1000; ++v) {
    data[static_cast<size_t>(v) % data.size()] ^= 1;
    const ChangeSet cs = Detect(*d, v, data);
    d->Abandon(v);  // every flush fails: never a base
    if (cs.full) break;
    ExpectLayered(cs, 0, 1, cs.changed);
  }
  EXPECT_GT(v, 200);
  EXPECT_LT(v, 1000);
  ExpectFull(Detect(*d, v + 1, data), data.size());  // v was the last kept; it failed
  ExpectLayered(Detect(*d, v + 2, data), v + 1, 1, {});
}

TEST(ChangeDetector, MaxLayersEndsTheChain) {
  auto d = Make(ChangeDetection::kHash, /*max_layers=*/2);
  auto data = Random(2 * kChunk, 9);
  const bool full[] = {true, false, false, true, false, false, true};
  const uint32_t depth[] = {0, 1, 2, 0, 1, 2, 0};
  for (int v = 0; v < 7; ++v) {
    data[static_cast<size_t>(v) * 11] ^= 1;
    const ChangeSet cs = Detect(*d, v, data);
    EXPECT_EQ(cs.full, full[v]) << "version " << v;
    EXPECT_EQ(cs.depth, depth[v]) << "version " << v;
    d->Accept(v);
  }
  auto never = Make(ChangeDetection::kHash, /*max_layers=*/0);
  for (int v = 0; v < 3; ++v) {
    ExpectFull(Detect(*never, v, data), data.size());
    never->Accept(v);
  }
}

TEST(ChangeDetector, ASizeChangeGivesAFullVersion) {
  auto d = Make(ChangeDetection::kHash);
  auto data = Random(2 * kChunk, 10);
  Detect(*d, 1, data);
  d->Accept(1);
  data.resize(data.size() + 100);
  ExpectFull(Detect(*d, 2, data), data.size());
  d->Accept(2);
  ExpectLayered(Detect(*d, 3, data), 2, 1, {});
}

TEST(ChangeDetector, BadInput) {
  auto d = Make(ChangeDetection::kHash);
  auto r = d->Detect(1, nullptr, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  auto empty = d->Detect(2, nullptr, 0);  // an empty region stores nothing
  ASSERT_TRUE(empty.ok());
  ExpectFull(*empty, 0);
  EXPECT_TRUE(empty->changed.empty());
  ChangeOptions o{.mode = ChangeDetection::kPages};
  auto p = MakeChangeDetector(o, nullptr);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::kUnsupported);
  EXPECT_NE(p.status().message().find("page tracker"), std::string::npos) << p.status().ToString();
  o.hash_chunk = 0;
  EXPECT_EQ(MakeChangeDetector(o, nullptr).status().code(), Code::kInvalidArgument);
}

// A scripted page tracker: each Collect returns the next entry.
class FakePages final : public PageSource {
 public:
  struct Script {
    std::deque<Result<ExtentList>> collects;
    int suspends = 0;
  };
  explicit FakePages(Script* s) : s_(s) {}
  Result<ExtentList> Collect() override {
    if (s_->collects.empty()) return ExtentList{};
    Result<ExtentList> r = std::move(s_->collects.front());
    s_->collects.pop_front();
    return r;
  }
  void Suspend() override { ++s_->suspends; }

 private:
  Script* s_;
};

TEST(ChangeDetector, PagesCarryWritesOfVersionsInFlightAndAbandoned) {
  FakePages::Script script;
  auto d = Make(ChangeDetection::kPages, 10, std::make_unique<FakePages>(&script));
  std::vector<uint8_t> data(64 << 10);
  script.collects = {ExtentList{{0, 4096}}, ExtentList{{8192, 4096}}, ExtentList{{16384, 4096}},
                     ExtentList{{40960, 1 << 20}}, ExtentList{}, ExtentList{}};
  ExpectFull(Detect(*d, 1, data), data.size());
  d->Accept(1);
  ExpectLayered(Detect(*d, 2, data), 1, 1, {{8192, 4096}});
  d->Abandon(2);  // its page was never stored: the next version carries it
  d->Accept(2);   // ignored: it failed
  ExpectLayered(Detect(*d, 3, data), 1, 1, {{8192, 4096}, {16384, 4096}});
  // 3 in flight: 4 stores only its own pages; a report past the end is clipped.
  ExpectLayered(Detect(*d, 4, data), 3, 2, {{40960, data.size() - 40960}});
  d->Abandon(3);  // 4 with it: 5 carries the writes of 2, 3 and 4
  ExpectLayered(Detect(*d, 5, data), 1, 1, {{8192, 4096}, {16384, 4096}, {40960, data.size() - 40960}});
  d->Accept(5);
  ExpectLayered(Detect(*d, 6, data), 5, 2, {});
  EXPECT_STREQ(d->name(), "pages");
  EXPECT_EQ(d->counters().bytes_hashed, 0u);
}

// Version numbers out of order: the base is the previous capture, whatever
// its number.
TEST(ChangeDetector, TheBaselineFollowsCaptureOrderNotVersionNumbers) {
  FakePages::Script script;
  auto d = Make(ChangeDetection::kPages, 10, std::make_unique<FakePages>(&script));
  std::vector<uint8_t> data(64 << 10);
  script.collects = {ExtentList{}, ExtentList{{0, 4096}}, ExtentList{{8192, 4096}}, ExtentList{{16384, 4096}}};
  Detect(*d, 1, data);
  d->Accept(1);
  ExpectLayered(Detect(*d, 5, data), 1, 1, {{0, 4096}});
  ExpectLayered(Detect(*d, 3, data), 5, 2, {{8192, 4096}});  // captured after 5
  d->Accept(5);
  d->Accept(3);
  d->Accept(5);  // captured before 3: ignored
  ExpectLayered(Detect(*d, 6, data), 3, 3, {{16384, 4096}});
}

TEST(ChangeDetector, PagesLostTrackingGivesAFullVersion) {
  FakePages::Script script;
  auto d = Make(ChangeDetection::kPages, 10, std::make_unique<FakePages>(&script));
  std::vector<uint8_t> data(32 << 10);
  script.collects = {ExtentList{}, Status::State("region was munmapped"), ExtentList{{0, 4096}}};
  Detect(*d, 1, data);
  d->Accept(1);
  ExpectFull(Detect(*d, 2, data), data.size());
  d->Accept(2);
  ExpectLayered(Detect(*d, 3, data), 2, 1, {{0, 4096}});
}

TEST(ChangeDetector, AutoFallsBackToHashWhenTrackingIsLost) {
  FakePages::Script script;
  auto d = Make(ChangeDetection::kAuto, 10, std::make_unique<FakePages>(&script));
  auto data = Random(4 * kChunk, 11);
  script.collects = {ExtentList{}, ExtentList{{4096, 4096}}, Status::State("uffd gone")};
  Detect(*d, 1, data);
  d->Accept(1);
  EXPECT_STREQ(d->name(), "auto:pages");
  ExpectLayered(Detect(*d, 2, data), 1, 1, {{4096, 4096}});
  d->Accept(2);
  ExpectFull(Detect(*d, 3, data), data.size());
  EXPECT_STREQ(d->name(), "auto:hash");
  EXPECT_EQ(d->counters().fallbacks, 1u);
  d->Accept(3);
  data[5] ^= 1;
  ExpectLayered(Detect(*d, 4, data), 3, 1, {{0, kChunk}});
  EXPECT_TRUE(script.collects.empty());
  EXPECT_STREQ(Make(ChangeDetection::kAuto)->name(), "auto:hash");
}

// AI-Ckpt's "deactivate monitoring", scripted: every capture is accepted
// before the next; `all` rewrites the whole region, otherwise one chunk.
TEST(ChangeDetector, AutoDeactivatesMonitoringWhileMostChanges) {
  const AutoPolicy policy{.high_fraction = 0.5, .high_runs = 3, .wait = 2, .max_wait = 4};
  auto d = Make(ChangeDetection::kAuto, /*max_layers=*/100, nullptr, policy);
  auto data = Random(8 * kChunk, 12);
  std::mt19937 rng(13);
  // (rewrite everything?, expected full?, expected deactivated after, hashed?)
  struct Step {
    bool all, full, deactivated, hashed;
  };
  const Step steps[] = {
      {true, true, false, true},    // 1: first version
      {true, false, false, true},   // 2: high 1
      {true, false, false, true},   // 3: high 2
      {true, false, true, true},    // 4: high 3 -> deactivated (wait 2)
      {true, true, true, false},    // 5: skipped
      {true, true, true, false},    // 6: skipped
      {true, true, false, true},    // 7: re-check baseline (full)
      {true, false, true, true},    // 8: re-check high -> deactivated, wait 4
      {false, true, true, false},   // 9-12: skipped, though little changes now
      {false, true, true, false},
      {false, true, true, false},
      {false, true, true, false},
      {false, true, false, true},   // 13: re-check baseline
      {false, false, false, true},  // 14: re-check low -> active
      {true, false, false, true},   // 15: high 1 (the run starts again)
      {false, false, false, true},  // 16: low
  };
  uint64_t hashed = 0;
  int64_t v = 0;
  for (const Step& s : steps) {
    ++v;
    if (s.all) {
      for (auto& b : data) b = static_cast<uint8_t>(rng());
    } else {
      data[3 * kChunk] ^= 1;
    }
    const ChangeSet cs = Detect(*d, v, data);
    d->Accept(v);
    hashed += s.hashed ? data.size() : 0;
    EXPECT_EQ(cs.full, s.full) << "version " << v;
    EXPECT_EQ(d->counters().deactivated, s.deactivated) << "version " << v;
    EXPECT_EQ(d->counters().bytes_hashed, hashed) << "version " << v;
    if (!s.full && !s.all) {
      EXPECT_EQ(cs.changed, (ExtentList{{3 * kChunk, kChunk}})) << "version " << v;
    }
  }
  EXPECT_EQ(d->counters().deactivations, 2u);
}

TEST(ChangeDetector, AutoSuspendsTheTrackerWhenDeactivated) {
  FakePages::Script script;
  const AutoPolicy policy{.high_fraction = 0.5, .high_runs = 2, .wait = 1, .max_wait = 1};
  auto d = Make(ChangeDetection::kAuto, 100, std::make_unique<FakePages>(&script), policy);
  std::vector<uint8_t> data(16 << 10);
  const ExtentList all{{0, data.size()}};
  script.collects = {ExtentList{}, all, all, all, ExtentList{}, ExtentList{}};
  for (int64_t v = 1; v <= 6; ++v) {
    Detect(*d, v, data);
    d->Accept(v);
    if (v == 3) {
      EXPECT_EQ(script.suspends, 1);  // after two highs
      EXPECT_TRUE(d->counters().deactivated);
    }
  }
  // 4: skipped (the tracker not asked), 5: re-check baseline, 6: low -> active.
  EXPECT_FALSE(d->counters().deactivated);
  EXPECT_EQ(script.collects.size(), 1u);
  EXPECT_STREQ(d->name(), "auto:pages");
}

}  // namespace
}  // namespace cairn::core
