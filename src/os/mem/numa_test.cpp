// os::Numa: the real layer on this machine (one node, its CPUs), a sysfs
// tree made in a temp dir (several nodes), and the fake.
#include "os/mem/numa.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "testing/test_paths.hpp"

namespace cairn::os {
namespace {

TEST(CpuList, ParsesAndFormatsRanges) {
  auto cpus = ParseCpuList("0-3,8,10-11\n");
  ASSERT_TRUE(cpus.ok()) << cpus.status().ToString();
  EXPECT_EQ(*cpus, (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(FormatCpuList(*cpus), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_TRUE(ParseCpuList("").ok());
}

TEST(CpuList, RejectsBadParts) {
  auto bad = ParseCpuList("0-3,x");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'x'"), std::string::npos) << bad.status().ToString();
  EXPECT_FALSE(ParseCpuList("3-1").ok());
}

TEST(RealNuma, ReadsSeveralNodesFromASysfsTree) {
  const std::string root = ::testing::TempDir() + "/numa_sysfs_" + std::to_string(::getpid());
  std::filesystem::remove_all(root);
  const char* lists[] = {"0-3\n", "4-7\n", "\n"};  // node2: memory only
  for (int k = 0; k < 3; ++k) {
    std::filesystem::create_directories(root + "/node" + std::to_string(k));
    std::ofstream(root + "/node" + std::to_string(k) + "/cpulist") << lists[k];
  }
  std::filesystem::create_directories(root + "/power");  // not a node
  auto numa = MakeRealNuma(root);
  const Topology& t = numa->topology();
  ASSERT_EQ(t.nodes(), 3);
  EXPECT_EQ(t.node_cpus[1], (std::vector<int>{4, 5, 6, 7}));
  EXPECT_TRUE(t.node_cpus[2].empty());
  EXPECT_EQ(t.cpus(), 8);
  EXPECT_EQ(t.NodeOfCpu(5), 1);
  EXPECT_EQ(t.NodeOfCpu(9), -1);
  std::filesystem::remove_all(root);
}

TEST(RealNuma, NoSysfsTreeIsOneNodeWithTheUsableCpus) {
  auto numa = MakeRealNuma("/nonexistent/cairn/numa");
  ASSERT_EQ(numa->topology().nodes(), 1);
  EXPECT_GE(numa->topology().cpus(), 1);
}

TEST(RealNuma, QueriesAndBindsPagesOnNodeZero) {
  Numa& numa = RealNuma();
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  void* p = ::mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto* bytes = static_cast<char*>(p);
  std::memset(bytes, 1, page);  // page 0 resident, the others not
  void* pages[2] = {bytes, bytes + page};
  int nodes[2] = {7, 7};
  ASSERT_TRUE(numa.QueryNodes(pages, nodes).ok());
  EXPECT_EQ(nodes[0], 0);
  EXPECT_EQ(nodes[1], -1);  // never touched
  // Bound to node 0, then touched: resident on node 0.
  ASSERT_TRUE(numa.Bind(p, 4 * page, Binding{.node = 0}).ok());
  std::memset(bytes, 2, 4 * page);
  ASSERT_TRUE(numa.QueryNodes(pages, nodes).ok());
  EXPECT_EQ(nodes[1], 0);
  EXPECT_TRUE(numa.Unbind(p, 4 * page).ok());
  EXPECT_FALSE(numa.Bind(p, page, Binding{.node = numa.topology().nodes()}).ok());
  ::munmap(p, 4 * page);
}

TEST(RealNuma, SetsAndReadsAThreadsAffinity) {
  Numa& numa = RealNuma();
  auto all = numa.GetAffinity(0);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_FALSE(all->empty());
  const int last = all->back();
  std::thread t([&] {  // a thread of its own: the test runner's affinity stays
    ASSERT_TRUE(numa.SetAffinity(0, {last}).ok());
    auto mine = numa.GetAffinity(CurrentTid());
    ASSERT_TRUE(mine.ok());
    EXPECT_EQ(*mine, std::vector<int>{last});
  });
  t.join();
  EXPECT_FALSE(numa.SetAffinity(0, {-1}).ok());
}

TEST(FakeNuma, RecordsBindsAndMovesPages) {
  FakeNuma numa(Topology{{{0, 1}, {2, 3}, {4, 5}}}, /*default_node=*/0);
  alignas(4096) static char buf[4 * 4096];
  numa.Place(buf + 4096, 4096, 2);
  void* pages[2] = {buf, buf + 4096};
  int nodes[2];
  ASSERT_TRUE(numa.QueryNodes(pages, nodes).ok());
  EXPECT_EQ(nodes[0], 0);
  EXPECT_EQ(nodes[1], 2);
  ASSERT_TRUE(numa.Bind(buf, 2 * 4096, Binding{.node = 1}).ok());
  ASSERT_TRUE(numa.QueryNodes(pages, nodes).ok());
  EXPECT_EQ(nodes[0], 1);
  EXPECT_EQ(nodes[1], 1);
  ASSERT_EQ(numa.binds().size(), 1u);
  EXPECT_EQ(numa.binds()[0], (FakeNuma::BindCall{reinterpret_cast<uintptr_t>(buf), 2 * 4096, 1}));
  EXPECT_FALSE(numa.Bind(buf, 4096, Binding{.node = 3}).ok());
  ASSERT_TRUE(numa.SetAffinity(0, {4}).ok());
  auto got = numa.GetAffinity(0);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, std::vector<int>{4});
  EXPECT_EQ(numa.query_pages(), 4);
}


// hwloc (optional at build time): a 2-package, 4-node machine from an XML
// topology, as HWLOC_XMLFILE would give it to RealNuma on this one-node
// machine.
const std::string kXmlPath = std::string(test::kSourceDir) + "/tests/data/topology-2pkg-4numa.xml";
const char* const kXml = kXmlPath.c_str();

void ExpectFourNodes(const Topology& t) {
  ASSERT_EQ(t.nodes(), 4);
  EXPECT_EQ(t.node_cpus[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(t.node_cpus[1], (std::vector<int>{2, 3}));
  EXPECT_EQ(t.node_cpus[2], (std::vector<int>{4, 5}));
  EXPECT_EQ(t.node_cpus[3], (std::vector<int>{6, 7}));
  EXPECT_EQ(t.cpus(), 8);
  EXPECT_EQ(t.NodeOfCpu(5), 2);
}

TEST(Hwloc, ReadsNodesAndCpusOfAnXmlTopology) {
  if (!HaveHwloc()) GTEST_SKIP() << "built without hwloc (libhwloc-dev; scripts/deps.sh installs it)";
  auto t = ReadHwlocTopology(kXml);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ExpectFourNodes(*t);
}

TEST(Hwloc, HonoursHwlocXmlfile) {
  if (!HaveHwloc()) GTEST_SKIP() << "built without hwloc (libhwloc-dev; scripts/deps.sh installs it)";
  const char* old = std::getenv("HWLOC_XMLFILE");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("HWLOC_XMLFILE", kXml, 1);
  auto t = ReadHwlocTopology("");
  if (old != nullptr) {
    ::setenv("HWLOC_XMLFILE", saved.c_str(), 1);
  } else {
    ::unsetenv("HWLOC_XMLFILE");
  }
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ExpectFourNodes(*t);
}

TEST(Hwloc, MissingXmlIsAnErrorNamingTheFile) {
  if (!HaveHwloc()) {
    EXPECT_EQ(ReadHwlocTopology(kXml).status().code(), Code::kUnsupported);
    return;
  }
  auto t = ReadHwlocTopology("/nonexistent/topo.xml");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("/nonexistent/topo.xml"), std::string::npos) << t.status().ToString();
}

// The machine's own topology through hwloc agrees with sysfs on the nodes.
TEST(Hwloc, MachineTopologyMatchesSysfs) {
  if (!HaveHwloc()) GTEST_SKIP() << "built without hwloc (libhwloc-dev; scripts/deps.sh installs it)";
  if (std::getenv("HWLOC_XMLFILE") != nullptr) GTEST_SKIP() << "HWLOC_XMLFILE is set";
  auto t = ReadHwlocTopology("");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto sysfs = MakeRealNuma("/sys/devices/system/node");
  EXPECT_EQ(t->nodes(), sysfs->topology().nodes());
}

}  // namespace
}  // namespace cairn::os
