// Placement through the client (docs/design.md, "Placement"): records written
// beside checkpoint files, restores that bind each run to its node (checked
// through os::FakeNuma, several simulated nodes), thread affinities recorded
// and restored (for real on this machine's CPUs), topology mismatch, files
// without records, and the feature off.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <thread>

#include "cairn/cairn.hpp"
#include "format/naming.hpp"
#include "format/placement.hpp"
#include "os/mem/numa.hpp"
#include "testing/test_paths.hpp"
#include "testing/test_util.hpp"

namespace cairn {
namespace {

namespace fs = std::filesystem;
using namespace test;

constexpr size_t kGranule = 2u << 20;

os::Topology Nodes(int n) {
  os::Topology t;
  for (int k = 0; k < n; ++k) t.node_cpus.push_back({2 * k, 2 * k + 1});
  return t;
}

struct Aligned {
  explicit Aligned(size_t n) : bytes(n), data(static_cast<char*>(std::aligned_alloc(kGranule, n))) {}
  ~Aligned() { std::free(data); }
  size_t bytes;
  char* data;
};

class PlacementTest : public ScratchDirTest {
 protected:
  PlacementTest() : ScratchDirTest("placement") {}
  // host_cache.numa off: the binds checked below are the restore's only
  // (the NUMA cache's tests turn it on).
  Config WithNuma(os::Numa* numa) {
    Config c = MakeConfig(16 * kMiB, 1 * kMiB);
    c.numa = numa;
    c.host_cache_numa = "off";
    // No initializer thread: a chunk it has claimed to touch is not free, so
    // a capture needing that node's last chunk would take another node's
    // (locality never waits), and the NumaCache tests count where blocks land.
    c.init = CacheInit::kLazy;
    return c;
  }
  std::string RecordPath(const Config& c, int64_t v) { return format::PlacementPath(c.scratch_dir, "sim", v); }
  std::string DataPath(const Config& c, int64_t v) {
    return format::EntryPath(c.scratch_dir, "sim", format::EntryKind::kCheckpoint, v);
  }

  // The job before the restart: saves version 1 of a_ and b_ spread over
  // at_save_'s four nodes (a_: node 1 then 3, b_: node 2), with the
  // checkpointing thread on `cpu` when given, and closes its client.
  void SaveJob(const Config& c, std::optional<int> cpu = std::nullopt) {
    auto client = OpenClient(c);
    ASSERT_NE(client, nullptr);
    if (cpu) ASSERT_OK(at_save_.SetAffinity(0, {*cpu}));
    PlaceAndCheckpoint(*client);
  }
  // Places a_ (node 1 then 3) and b_ (node 2) on at_save_'s nodes, fills
  // them, protects them and checkpoints version 1 to the local level.
  void PlaceAndCheckpoint(Client& client) {
    at_save_.Place(a_.data, kGranule, 1);
    at_save_.Place(a_.data + kGranule, 2 * kGranule, 3);
    at_save_.Place(b_.data, b_.bytes, 2);
    std::memset(a_.data, 7, a_.bytes);
    std::memset(b_.data, 9, b_.bytes);
    ASSERT_OK(client.Protect(1, a_.data, a_.bytes));
    ASSERT_OK(client.Protect(2, b_.data, b_.bytes));
    ASSERT_OK(client.Checkpoint("sim", 1));
    ASSERT_OK(client.Wait("sim", 1, Level::kLocal));
  }
  // The restarted job: a new client with config `c`, a_ (and b_ when
  // `both`) protected, version 1 restored; nullptr if it could not open.
  std::unique_ptr<Client> Restart(const Config& c, bool both = true) {
    auto client = OpenClient(c);
    EXPECT_NE(client, nullptr);
    if (!client) return nullptr;
    EXPECT_OK(client->Protect(1, a_.data, a_.bytes));
    if (both) EXPECT_OK(client->Protect(2, b_.data, b_.bytes));
    EXPECT_OK(client->Restore("sim", 1));
    return client;
  }

  os::FakeNuma at_save_{Nodes(4)};
  Aligned a_{3 * kGranule}, b_{kGranule};
};

TEST_F(PlacementTest, RecordRoundTripsOverSeveralNodesAndRestoreBindsEachRun) {
  const Config c = WithNuma(&at_save_);
  SaveJob(c, 6);
  auto rec = format::ReadPlacementOf(os::FileSystem::Default(), DataPath(c, 1));
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(rec->node_count, 4u);
  ASSERT_NE(rec->region(1), nullptr);
  EXPECT_EQ(rec->region(1)->runs, (std::vector<format::PlacementRun>{{1, kGranule}, {3, 2 * kGranule}}));
  EXPECT_EQ(rec->region(2)->runs, (std::vector<format::PlacementRun>{{2, kGranule}}));
  ASSERT_NE(rec->thread(format::kCheckpointingThread), nullptr);
  EXPECT_EQ(rec->thread(format::kCheckpointingThread)->cpus, std::vector<int>{6});

  // A restart: a new process (client), pages wherever (all on node 0).
  os::FakeNuma at_restart(Nodes(4));
  std::memset(a_.data, 0, a_.bytes);
  auto client = Restart(WithNuma(&at_restart));
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(a_.data[a_.bytes - 1], 7);
  const auto A = reinterpret_cast<uintptr_t>(a_.data), B = reinterpret_cast<uintptr_t>(b_.data);
  const std::vector<os::FakeNuma::BindCall> want = {{A, kGranule, 1}, {A + kGranule, 2 * kGranule, 3}, {B, kGranule, 2}};
  EXPECT_EQ(at_restart.binds(), want);
  EXPECT_EQ(at_restart.unbinds(), 3);  // the default policy again afterwards
  // The checkpointing thread's affinity, on this (fake) machine.
  ASSERT_OK(client->RestoreAffinity(Client::kCheckpointingThread));
  auto mine = at_restart.GetAffinity(0);
  ASSERT_TRUE(mine.ok());
  EXPECT_EQ(*mine, std::vector<int>{6});
  EXPECT_EQ(client->RestoreAffinity(5).code(), Code::kNotFound);
}

TEST_F(PlacementTest, FewerNodesAtRestartMapNodeKToKModN) {
  SaveJob(WithNuma(&at_save_), 7);
  os::FakeNuma at_restart(Nodes(2));  // cpus 0..3
  auto client = Restart(WithNuma(&at_restart));
  ASSERT_NE(client, nullptr);
  std::vector<int> nodes;
  for (const auto& call : at_restart.binds()) nodes.push_back(call.node);
  EXPECT_EQ(nodes, (std::vector<int>{1, 1, 0}));  // 1, 3 mod 2, 2 mod 2
  ASSERT_OK(client->RestoreAffinity(Client::kCheckpointingThread));
  auto mine = at_restart.GetAffinity(0);
  ASSERT_TRUE(mine.ok());
  EXPECT_EQ(*mine, std::vector<int>{3});  // cpu 7 of 4 cpus
}

TEST_F(PlacementTest, VersionWithoutRecordRestoresAsBefore) {
  const Config c = WithNuma(&at_save_);
  SaveJob(c);
  ASSERT_TRUE(fs::remove(RecordPath(c, 1)));  // as written by an older build
  os::FakeNuma at_restart(Nodes(4));
  std::memset(a_.data, 0, a_.bytes);
  auto client = Restart(WithNuma(&at_restart));
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(a_.data[0], 7);
  EXPECT_TRUE(at_restart.binds().empty());
  EXPECT_EQ(client->RestoreAffinity(Client::kCheckpointingThread).code(), Code::kState);
}

TEST_F(PlacementTest, RecordOfAnEarlierFileIsIgnored) {
  const Config c = WithNuma(&at_save_);
  SaveJob(c);
  // Another file of version 1 (data_created_ns differs from the record's).
  auto rec = format::ReadPlacementOf(os::FileSystem::Default(), DataPath(c, 1));
  ASSERT_TRUE(rec.ok());
  rec->data_created_ns += 1;
  ASSERT_OK(format::WritePlacement(os::FileSystem::Default(), RecordPath(c, 1), *rec));
  os::FakeNuma at_restart(Nodes(4));
  auto client = Restart(WithNuma(&at_restart));
  ASSERT_NE(client, nullptr);
  EXPECT_TRUE(at_restart.binds().empty());
}

TEST_F(PlacementTest, KeepAndInterleave) {
  SaveJob(WithNuma(&at_save_), 5);
  os::FakeNuma keep(Nodes(4));
  Config k = WithNuma(&keep);
  k.placement = "keep";
  {
    auto client = Restart(k, /*both=*/false);
    ASSERT_NE(client, nullptr);
    EXPECT_TRUE(keep.binds().empty());
    ASSERT_OK(keep.SetAffinity(0, {1}));
    ASSERT_OK(client->RestoreAffinity(Client::kCheckpointingThread));  // opt-out: no-op
    auto still = keep.GetAffinity(0);
    ASSERT_TRUE(still.ok());
    EXPECT_EQ(*still, std::vector<int>{1});
  }
  os::FakeNuma inter(Nodes(4));
  Config i = WithNuma(&inter);
  i.placement = "interleave";
  auto client = Restart(i, /*both=*/false);
  ASSERT_NE(client, nullptr);
  ASSERT_EQ(inter.binds().size(), 1u);
  EXPECT_EQ(inter.binds()[0], (os::FakeNuma::BindCall{reinterpret_cast<uintptr_t>(a_.data), a_.bytes, -1}));
}

TEST_F(PlacementTest, RecordingOffWritesAndQueriesNothing) {
  Config c = WithNuma(&at_save_);
  c.record_placement = false;
  SaveJob(c);
  EXPECT_TRUE(fs::exists(DataPath(c, 1)));
  EXPECT_FALSE(fs::exists(RecordPath(c, 1)));
  EXPECT_EQ(at_save_.query_pages(), 0);
}

// Both ways to the persistent tier: the persister writing from the cache,
// and the mover copying the committed scratch file.
TEST_F(PlacementTest, RetentionRemovesRecordsWithTheirVersions) {
  for (bool from_cache : {true, false}) {
    SCOPED_TRACE(from_cache ? "persist from cache" : "persist by file copy");
    Config c = MakeConfig(16 * kMiB, 1 * kMiB);
    c.scratch_dir += from_cache ? "-cache" : "-copy";
    c.keep_versions = 2;
    c.persistent_dir = c.scratch_dir + "-persistent";
    c.persist_from_cache = from_cache;
    auto client = OpenClient(c);
    ASSERT_NE(client, nullptr);
    Aligned a(kGranule);
    std::memset(a.data, 1, a.bytes);
    ASSERT_OK(client->Protect(1, a.data, a.bytes));
    for (int64_t v = 1; v <= 4; ++v) {
      ASSERT_OK(client->Checkpoint("sim", v));
      ASSERT_OK(client->Wait("sim", v, Level::kPersistent));
    }
    ASSERT_OK(client->Close());
    const std::vector<std::string> want = {"v00000000000000000003.cairn", "v00000000000000000003.placement",
                                           "v00000000000000000004.cairn", "v00000000000000000004.placement"};
    EXPECT_EQ(AllFiles(c.scratch_dir + "/sim"), want) << Join(AllFiles(c.scratch_dir + "/sim"));
    EXPECT_EQ(AllFiles(c.persistent_dir + "/sim"), want) << Join(AllFiles(c.persistent_dir + "/sim"));
    auto rec = format::ReadPlacementOf(os::FileSystem::Default(),
                                       format::EntryPath(c.persistent_dir, "sim", format::EntryKind::kCheckpoint, 4));
    EXPECT_TRUE(rec.ok()) << rec.status().ToString();
  }
}

// host_cache.numa = auto on four simulated nodes: 16 chunks of 1 MiB, four
// per node; a capture copies each block into a chunk of its source's node,
// and the flusher moves to that node's CPUs to write it.
TEST_F(PlacementTest, NumaCacheCapturesIntoChunksOfTheSourcesNode) {
  Config c = WithNuma(&at_save_);
  c.host_cache_numa = "auto";
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  ASSERT_EQ(at_save_.binds().size(), 4u) << "one range per node, bound at open";
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(at_save_.binds()[k].node, k);
    EXPECT_EQ(at_save_.binds()[k].bytes, 4 * kMiB);
  }
  ASSERT_NO_FATAL_FAILURE(PlaceAndCheckpoint(*client));
  const Stats st = client->GetStats();
  EXPECT_EQ(st.numa_local_chunks, 8u);
  EXPECT_EQ(st.numa_remote_chunks, 0u);
  std::set<std::vector<int>> moved;  // where background threads went
  for (const auto& [tid, cpus] : at_save_.affinity_sets()) {
    if (tid != os::CurrentTid()) moved.insert(cpus);
  }
  EXPECT_EQ(moved, (std::set<std::vector<int>>{{2, 3}, {4, 5}, {6, 7}})) << "nodes 1, 2 and 3";
}

// Recording off: the capture samples the source's nodes itself. A node with
// fewer free chunks than blocks gives the rest to other nodes.
TEST_F(PlacementTest, NumaCacheWithoutRecordSamplesAndFallsBackWhenTheNodeIsFull) {
  Config c = WithNuma(&at_save_);
  c.host_cache_numa = "auto";
  c.record_placement = false;
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  at_save_.Place(a_.data, a_.bytes, 3);  // 6 blocks, node 3 has 4 chunks
  std::memset(a_.data, 5, a_.bytes);
  ASSERT_OK(client->Protect(1, a_.data, a_.bytes));
  ASSERT_OK(client->Checkpoint("sim", 1));
  ASSERT_OK(client->Wait("sim", 1, Level::kLocal));
  EXPECT_FALSE(fs::exists(RecordPath(c, 1)));
  EXPECT_GT(at_save_.query_pages(), 0);
  const Stats st = client->GetStats();
  EXPECT_EQ(st.numa_local_chunks, 4u);
  EXPECT_EQ(st.numa_remote_chunks, 2u);
  std::memset(a_.data, 0, a_.bytes);
  ASSERT_OK(client->Restore("sim", 1));
  EXPECT_EQ(a_.data[0], 5);
  EXPECT_EQ(a_.data[a_.bytes - 1], 5);
}

// One node (auto): nothing is bound, sampled or moved.
TEST_F(PlacementTest, NumaCacheOffOnOneNode) {
  os::FakeNuma one(Nodes(1));
  Config c = WithNuma(&one);
  c.host_cache_numa = "auto";
  c.record_placement = false;
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  std::memset(a_.data, 5, a_.bytes);
  ASSERT_OK(client->Protect(1, a_.data, a_.bytes));
  ASSERT_OK(client->Checkpoint("sim", 1));
  ASSERT_OK(client->Wait("sim", 1, Level::kLocal));
  EXPECT_TRUE(one.binds().empty());
  EXPECT_EQ(one.query_pages(), 0);
  EXPECT_TRUE(one.affinity_sets().empty());
  const Stats st = client->GetStats();
  EXPECT_EQ(st.numa_local_chunks + st.numa_remote_chunks, 0u);
}

// A topology the kernel disagrees with (hwloc's XML of a 4-node machine on
// this one): `auto` leaves the cache unbound and works; `on` says why not.
TEST_F(PlacementTest, NumaCacheOnAnotherMachinesTopology) {
  if (!os::HaveHwloc()) GTEST_SKIP() << "built without hwloc (libhwloc-dev; scripts/deps.sh installs it)";
  if (os::RealNuma().topology().nodes() >= 4) GTEST_SKIP() << "this machine has the XML's nodes";
  auto xml = os::ReadHwlocTopology(std::string(test::kSourceDir) + "/tests/data/topology-2pkg-4numa.xml");
  ASSERT_TRUE(xml.ok()) << xml.status().ToString();
  auto numa = os::MakeRealNuma(*xml);
  Config c = WithNuma(numa.get());
  c.host_cache_numa = "auto";
  c.record_placement = false;
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  std::memset(a_.data, 5, a_.bytes);
  ASSERT_OK(client->Protect(1, a_.data, a_.bytes));
  ASSERT_OK(client->Checkpoint("sim", 1));
  ASSERT_OK(client->Wait("sim", 1, Level::kLocal));
  EXPECT_EQ(client->GetStats().numa_local_chunks, 0u) << "unbound: no node preference";
  client.reset();
  c.host_cache_numa = "on";
  auto refused = Client::Open(c);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("NUMA node 1"), std::string::npos) << refused.status().ToString();
}

TEST_F(PlacementTest, BadPlacementModeIsAConfigError) {
  Config c = MakeConfig();
  c.placement = "restored";
  Status s = c.Validate();
  EXPECT_EQ(s.code(), Code::kConfig);
  EXPECT_NE(s.message().find("restart.placement"), std::string::npos) << s.ToString();
}

// For real: a registered thread pinned to one CPU; after a restart another
// thread restores that affinity. The record also says where the pages were
// (node 0 on this machine).
TEST_F(PlacementTest, RealThreadAffinityRecordedAndRestored) {
  auto cpus = os::RealNuma().GetAffinity(0);
  ASSERT_TRUE(cpus.ok());
  const int target = cpus->back();
  Aligned a(2 * kGranule);
  std::memset(a.data, 3, a.bytes);
  Config c = MakeConfig(16 * kMiB, 1 * kMiB);
  {
    auto client = OpenClient(c);
    ASSERT_NE(client, nullptr);
    ASSERT_OK(client->Protect(1, a.data, a.bytes));
    std::thread worker([&] {
      ASSERT_OK(os::RealNuma().SetAffinity(0, {target}));
      ASSERT_OK(client->RegisterThread(0));
      ASSERT_OK(client->Checkpoint("sim", 1));  // recorded while it exists
      ASSERT_OK(client->Wait("sim", 1, Level::kLocal));
    });
    worker.join();
    EXPECT_EQ(client->RegisterThread(-2).code(), Code::kInvalidArgument);
  }
  auto rec = format::ReadPlacementOf(os::FileSystem::Default(), DataPath(c, 1));
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  ASSERT_NE(rec->thread(0), nullptr);
  EXPECT_EQ(rec->thread(0)->cpus, std::vector<int>{target});
  EXPECT_EQ(rec->region(1)->runs, (std::vector<format::PlacementRun>{{0, a.bytes}}));

  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  ASSERT_OK(client->Protect(1, a.data, a.bytes));
  ASSERT_OK(client->Restore("sim", 1));
  std::thread restarted([&] {
    ASSERT_OK(client->RestoreAffinity(0));
    auto now = os::RealNuma().GetAffinity(0);
    ASSERT_TRUE(now.ok());
    EXPECT_EQ(*now, std::vector<int>{target});
  });
  restarted.join();
}

}  // namespace
}  // namespace cairn
