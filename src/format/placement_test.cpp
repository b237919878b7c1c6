// Placement records (docs/format.md 5): round trip, and every check of 5.3
// that a damaged or foreign record fails.
#include "format/placement.hpp"

#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "format/le.hpp"
#include "util/crc32c.hpp"

namespace cairn::format {
namespace {

Placement Sample() {
  Placement p{.number = 42, .data_created_ns = 1700000000000000001, .node_count = 4, .cpu_count = 16};
  p.regions.push_back({.id = 3, .bytes = 10u << 20, .runs = {{0, 4u << 20}, {2, 2u << 20}, {-1, 4u << 20}}});
  p.regions.push_back({.id = -7, .bytes = 0, .runs = {}});
  p.regions.push_back({.id = 9, .bytes = 5000, .runs = {{3, 5000}}});
  p.threads.push_back({.index = kCheckpointingThread, .cpus = {0}});
  p.threads.push_back({.index = 0, .cpus = {0, 1, 2, 3}});
  p.threads.push_back({.index = 1, .cpus = {12}});
  return p;
}

// Re-seals a modified record so that only the check under test fails.
std::string Reseal(std::string b) {
  le::Put32(reinterpret_cast<uint8_t*>(b.data()) + b.size() - 4, crc32c::Value(b.data(), b.size() - 4));
  return b;
}

TEST(Placement, RoundTripsRegionsOverSeveralNodesAndThreads) {
  const Placement p = Sample();
  auto d = DecodePlacement(EncodePlacement(p));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(*d, p);
  ASSERT_NE(d->region(3), nullptr);
  EXPECT_EQ(d->region(3)->runs[1].node, 2);
  EXPECT_EQ(d->region(4), nullptr);
  ASSERT_NE(d->thread(1), nullptr);
  EXPECT_EQ(d->thread(1)->cpus, std::vector<int>{12});
}

TEST(Placement, AppendRunMergesEqualNeighbours) {
  std::vector<PlacementRun> runs;
  AppendRun(&runs, 1, 10);
  AppendRun(&runs, 1, 5);
  AppendRun(&runs, 0, 0);
  AppendRun(&runs, 2, 1);
  EXPECT_EQ(runs, (std::vector<PlacementRun>{{1, 15}, {2, 1}}));
}

TEST(Placement, DetectsDamage) {
  const std::string good = EncodePlacement(Sample());
  std::string flipped = good;
  flipped[60] ^= 1;
  auto r = DecodePlacement(flipped);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kCorrupt);
  EXPECT_NE(r.status().message().find("checksum"), std::string::npos) << r.status().ToString();
  EXPECT_FALSE(DecodePlacement(good.substr(0, 40)).ok());
  std::string magic = good;
  magic[0] = 'X';
  EXPECT_FALSE(DecodePlacement(Reseal(magic)).ok());
}

TEST(Placement, UnknownRecordVersionIsUnsupported) {
  std::string b = EncodePlacement(Sample());
  le::Put32(reinterpret_cast<uint8_t*>(b.data()) + 8, 2);
  auto r = DecodePlacement(Reseal(b));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnsupported);
}

TEST(Placement, RejectsRunsThatDoNotCoverTheRegionOrNameAnUnknownNode) {
  Placement short_runs = Sample();
  short_runs.regions[0].runs.pop_back();
  auto r = DecodePlacement(EncodePlacement(short_runs));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("region 3: runs cover"), std::string::npos) << r.status().ToString();

  Placement bad_node = Sample();
  bad_node.regions[2].runs[0].node = 4;  // node_count 4: nodes 0..3
  r = DecodePlacement(EncodePlacement(bad_node));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("node 4 of 4"), std::string::npos) << r.status().ToString();

  Placement twice = Sample();
  twice.threads.push_back({.index = 0, .cpus = {1}});
  EXPECT_FALSE(DecodePlacement(EncodePlacement(twice)).ok());

  Placement unsorted = Sample();
  unsorted.threads[1].cpus = {3, 1};
  EXPECT_FALSE(DecodePlacement(EncodePlacement(unsorted)).ok());

  std::string trailing = EncodePlacement(Sample());
  trailing.insert(trailing.size() - 4, std::string(4, '\0'));
  r = DecodePlacement(Reseal(trailing));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("after the last entry"), std::string::npos) << r.status().ToString();
}

TEST(Placement, FileRoundTripChecksNumberAndDataFile) {
  const std::string dir = ::testing::TempDir() + "/placement_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir + "/sim");
  const std::string path = PlacementPath(dir, "sim", 42);
  EXPECT_EQ(path, dir + "/sim/v00000000000000000042.placement");
  os::FileSystem* fs = os::FileSystem::Default();
  ASSERT_TRUE(WritePlacement(fs, path, Sample()).ok());
  auto back = ReadPlacement(fs, path, 42, Sample().data_created_ns);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, Sample());
  auto stale = ReadPlacement(fs, path, 42, 5);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.status().code(), Code::kState);
  EXPECT_NE(stale.status().message().find("earlier file"), std::string::npos);
  EXPECT_FALSE(ReadPlacement(fs, path, 41, Sample().data_created_ns).ok());
  EXPECT_EQ(ReadPlacement(fs, PlacementPath(dir, "sim", 1), 1, 0).status().code(), Code::kNotFound);
  // Only the record is left: no temp file.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/sim")) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cairn::format
