// core placement against a simulated 4-node machine (os::FakeNuma), and on
// this machine's real node 0.
#include "engine/placement.hpp"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

namespace cairn::core {
namespace {

constexpr uint32_t kGranule = 2u << 20;

os::Topology FourNodes() { return os::Topology{{{0, 1}, {2, 3}, {4, 5}, {6, 7}}}; }

// 2 MiB-aligned memory that is never touched (the fake decides where it is).
struct Aligned {
  // aligned_alloc wants a size that is a multiple of the alignment (C11;
  // ASan enforces it): allocate whole granules, use n.
  explicit Aligned(size_t n) : bytes(n) {
    data = static_cast<char*>(std::aligned_alloc(kGranule, (n + kGranule - 1) / kGranule * kGranule));
  }
  ~Aligned() { std::free(data); }
  char* data;
  size_t bytes;
};

TEST(PlacementRecord, RecordsOneSamplePerGranuleAsRuns) {
  os::FakeNuma numa(FourNodes(), /*default_node=*/0);
  Aligned mem(9 * kGranule + 4096);  // 10 granules, the last partial
  numa.Place(mem.data + 2 * kGranule, 3 * kGranule, 2);
  numa.Place(mem.data + 5 * kGranule, kGranule, 3);
  numa.Place(mem.data + 9 * kGranule, 4096, 1);
  auto r = RecordRegion(numa, 5, mem.data, mem.bytes, kGranule);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->id, 5);
  EXPECT_EQ(r->bytes, mem.bytes);
  const std::vector<format::PlacementRun> want = {
      {0, 2 * kGranule}, {2, 3 * kGranule}, {3, kGranule}, {0, 3 * kGranule}, {1, 4096}};
  EXPECT_EQ(r->runs, want);
  EXPECT_EQ(numa.query_pages(), 10);  // one per granule, not one per page
}

TEST(PlacementRecord, EmptyRegionHasNoRuns) {
  os::FakeNuma numa(FourNodes());
  auto r = RecordRegion(numa, 1, nullptr, 0, kGranule);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->runs.empty());
  EXPECT_EQ(numa.query_pages(), 0);
}

TEST(PlacementRestore, BindsEachRunToItsNodeAndUnbinds) {
  os::FakeNuma numa(FourNodes(), /*default_node=*/0);
  Aligned mem(4 * kGranule);
  const format::RegionPlacement r{.id = 1, .bytes = mem.bytes,
                                  .runs = {{3, kGranule}, {-1, kGranule}, {1, 2 * kGranule}}};
  std::vector<BoundRange> bound;
  ASSERT_TRUE(ApplyRegion(numa, &r, mem.data, mem.bytes, PlacementMode::kRestore, &bound).ok());
  const auto base = reinterpret_cast<uintptr_t>(mem.data);
  const std::vector<os::FakeNuma::BindCall> want = {{base, kGranule, 3}, {base + 2 * kGranule, 2 * kGranule, 1}};
  EXPECT_EQ(numa.binds(), want);
  // Each run's pages are now on its node.
  void* pages[3] = {mem.data, mem.data + 2 * kGranule, mem.data + 4 * kGranule - 4096};
  int nodes[3];
  ASSERT_TRUE(numa.QueryNodes(pages, nodes).ok());
  EXPECT_EQ(nodes[0], 3);
  EXPECT_EQ(nodes[1], 1);
  EXPECT_EQ(nodes[2], 1);
  ASSERT_TRUE(Unbind(numa, bound).ok());
  EXPECT_EQ(numa.unbinds(), 2);
}

TEST(PlacementRestore, FewerNodesMapNodeKToKModN) {
  os::FakeNuma numa(os::Topology{{{0}, {1}}});  // 2 nodes now; recorded on 4
  Aligned mem(4 * kGranule);
  const format::RegionPlacement r{.id = 1, .bytes = mem.bytes,
                                  .runs = {{0, kGranule}, {1, kGranule}, {2, kGranule}, {3, kGranule}}};
  std::vector<BoundRange> bound;
  ASSERT_TRUE(ApplyRegion(numa, &r, mem.data, mem.bytes, PlacementMode::kRestore, &bound).ok());
  std::vector<int> got;
  for (const auto& b : numa.binds()) got.push_back(b.node);
  EXPECT_EQ(got, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(MapNode(5, 3), 2);
  EXPECT_EQ(MapNode(1, 3), 1);
  EXPECT_EQ(MapNode(-1, 3), -1);
}

TEST(PlacementRestore, KeepBindsNothingAndInterleaveBindsTheWholeRegion) {
  os::FakeNuma numa(FourNodes());
  Aligned mem(2 * kGranule);
  const format::RegionPlacement r{.id = 1, .bytes = mem.bytes, .runs = {{2, 2 * kGranule}}};
  std::vector<BoundRange> bound;
  ASSERT_TRUE(ApplyRegion(numa, &r, mem.data, mem.bytes, PlacementMode::kKeep, &bound).ok());
  EXPECT_TRUE(numa.binds().empty());
  ASSERT_TRUE(ApplyRegion(numa, nullptr, mem.data, mem.bytes, PlacementMode::kInterleave, &bound).ok());
  ASSERT_EQ(numa.binds().size(), 1u);
  EXPECT_EQ(numa.binds()[0].node, -1);
  EXPECT_EQ(numa.binds()[0].bytes, mem.bytes);
}

TEST(PlacementRestore, RecordOfAnotherSizeOrNoRecordBindsNothing) {
  os::FakeNuma numa(FourNodes());
  Aligned mem(2 * kGranule);
  const format::RegionPlacement r{.id = 1, .bytes = kGranule, .runs = {{2, kGranule}}};
  std::vector<BoundRange> bound;
  ASSERT_TRUE(ApplyRegion(numa, &r, mem.data, mem.bytes, PlacementMode::kRestore, &bound).ok());
  ASSERT_TRUE(ApplyRegion(numa, nullptr, mem.data, mem.bytes, PlacementMode::kRestore, &bound).ok());
  EXPECT_TRUE(numa.binds().empty());
  EXPECT_TRUE(bound.empty());
}

TEST(PlacementRestore, UnalignedRunsBindOnlyTheirWholePages) {
  os::FakeNuma numa(FourNodes());
  Aligned mem(4 * 4096);
  const format::RegionPlacement r{.id = 1, .bytes = 3 * 4096 + 100, .runs = {{1, 100}, {2, 3 * 4096}}};
  std::vector<BoundRange> bound;
  ASSERT_TRUE(ApplyRegion(numa, &r, mem.data + 4096 - 100, r.bytes, PlacementMode::kRestore, &bound).ok());
  const auto base = reinterpret_cast<uintptr_t>(mem.data);
  ASSERT_EQ(numa.binds().size(), 1u);  // the 100-byte run holds no whole page
  EXPECT_EQ(numa.binds()[0], (os::FakeNuma::BindCall{base + 4096, 3 * 4096, 2}));
}

TEST(PlacementMaps, CpusPastThisMachineWrapAround) {
  const os::Topology two{{{0, 1}}};
  EXPECT_EQ(MapCpus({1}, two), std::vector<int>{1});
  EXPECT_EQ(MapCpus({2, 3}, two), (std::vector<int>{0, 1}));
  EXPECT_EQ(MapCpus({4, 6}, two), std::vector<int>{0});
  EXPECT_TRUE(ParsePlacementMode("interleave").ok());
  auto bad = ParsePlacementMode("restored");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'restored'"), std::string::npos);
}

TEST(PlacementReal, RecordsAndRestoresOnNodeZero) {
  os::Numa& numa = os::RealNuma();
  const size_t bytes = 3 * kGranule;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  std::memset(p, 1, kGranule);  // granule 0 resident; 1 and 2 never touched
  auto r = RecordRegion(numa, 1, p, bytes, kGranule);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // The first granule (at least its first page) is resident on node 0.
  ASSERT_FALSE(r->runs.empty());
  EXPECT_EQ(r->runs[0].node, 0);
  EXPECT_EQ(r->runs.back().node, -1);
  // Restoring "everything on node 0" binds, the restore's writes land there.
  const format::RegionPlacement all0{.id = 1, .bytes = bytes, .runs = {{0, bytes}}};
  std::vector<BoundRange> bound;
  ASSERT_TRUE(ApplyRegion(numa, &all0, p, bytes, PlacementMode::kRestore, &bound).ok());
  std::memset(p, 2, bytes);
  ASSERT_TRUE(Unbind(numa, bound).ok());
  auto after = RecordRegion(numa, 1, p, bytes, kGranule);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->runs, (std::vector<format::PlacementRun>{{0, bytes}}));
  ::munmap(p, bytes);
}

}  // namespace
}  // namespace cairn::core
