// Errors at the API boundary: bad configurations, unusable directories, bad
// arguments and calls in the wrong state. Each gives the documented Code and
// a message that names what is wrong; none crashes.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cairn/cairn.hpp"
#include "testing/test_util.hpp"

namespace cairn {
namespace {

namespace fs = std::filesystem;
using namespace test;

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

class ApiErrorsTest : public ScratchDirTest {
 protected:
  ApiErrorsTest() : ScratchDirTest("api_errors") {}

  std::string WriteFile(const std::string& name, const std::string& text) {
    std::string path = tmp_.path() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
};

TEST_F(ApiErrorsTest, ConfigStringErrorsNameTheKey) {
  struct Case {
    std::string toml;
    std::string must_mention;
  };
  const std::vector<Case> cases{
      {"[storage]\nscrach = \"/x\"\n", "storage.scrach"},            // unknown key
      {"[bogus]\nx = 1\n", "bogus"},                                 // unknown table
      {"[host_cache]\nsize = \"12 parsecs\"\n", "host_cache.size"},  // bad size
      {"[host_cache]\nsize = -5\n", "host_cache.size"},
      {"[host_cache]\nblock_size = 100000\n", "block_size"},    // not 4 KiB aligned
      {"[host_cache]\nblock_size = \"4KiB\"\n", "block_size"},  // below 64 KiB
      {"[host_cache]\nsize = \"64KiB\"\nblock_size = \"64KiB\"\n",
       "host_cache.size"},  // < 2 blocks
      {"[retention]\nkeep_versions = \"two\"\n", "retention.keep_versions"},
      {"[retention]\nkeep_versions = 0\n", "retention.keep_versions"},
      {"[history]\nprefetch_depth = -1\n", "history.prefetch_depth"},
      {"[storage]\nfsync = \"yes\"\n", "storage.fsync"},
      {"[storage]\nscratch = \"\"\n", "storage.scratch"},
      {"[storage]\nscratch = \"/a/b\"\npersistent = \"/a/b/\"\n", "storage.persistent"},
      {"[storage\nscratch = 1\n", "TOML syntax error"},  // syntax error
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.toml);
    auto r = LoadConfigFromString(c.toml, "unit.toml", /*apply_environment=*/false);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kConfig) << r.status().ToString();
    EXPECT_TRUE(Contains(r.status().message(), c.must_mention)) << r.status().message();
    EXPECT_TRUE(
        Contains(r.status().message(), "unit.toml") ||
        Contains(r.status().message(), "host_cache") || Contains(r.status().message(), "storage") ||
        Contains(r.status().message(), "retention") || Contains(r.status().message(), "history"))
        << r.status().message();
  }
  // And a good one parses, with sizes in all their spellings.
  auto ok = LoadConfigFromString(
      "[storage]\nscratch = \"/tmp/x\"\n[host_cache]\nsize = \"16 MiB\"\n"
      "block_size = 131072\n[retention]\nkeep_versions = 4\n",
      "good.toml", false);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->scratch_dir, "/tmp/x");
  EXPECT_EQ(ok->host_cache_bytes, 16 * kMiB);
  EXPECT_EQ(ok->block_bytes, 128 * kKiB);
  EXPECT_EQ(ok->keep_versions, 4);
}

TEST_F(ApiErrorsTest, ConfigFileErrorsNameFileAndLine) {
  const std::string path = WriteFile("cairn.toml",
                                     "# comment\n"
                                     "[host_cache]\n"
                                     "size = \"1 MiB\"\n"
                                     "blok_size = \"64KiB\"\n");
  auto r = LoadConfig(path.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kConfig);
  EXPECT_TRUE(Contains(r.status().message(), "host_cache.blok_size")) << r.status().message();
  EXPECT_TRUE(Contains(r.status().message(), path)) << r.status().message();
  EXPECT_TRUE(Contains(r.status().message(), "line 4")) << r.status().message();

  const std::string bad_size = WriteFile("size.toml", "[host_cache]\nsize = \"lots\"\n");
  r = LoadConfig(bad_size.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kConfig);
  EXPECT_TRUE(Contains(r.status().message(), "host_cache.size")) << r.status().message();
  EXPECT_TRUE(Contains(r.status().message(), "lots")) << r.status().message();

  const std::string missing = tmp_.path() + "/does-not-exist.toml";
  r = LoadConfig(missing.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kConfig);
  EXPECT_TRUE(Contains(r.status().message(), missing)) << r.status().message();

  // Client::Open(path) reports the same error.
  auto c = Client::Open(path.c_str());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kConfig);
  EXPECT_TRUE(Contains(c.status().message(), "blok_size")) << c.status().message();
}

TEST_F(ApiErrorsTest, ScratchDirThatIsAFile) {
  const std::string file = WriteFile("not-a-dir", "x");
  Config c = MakeConfig();
  c.scratch_dir = file;
  auto r = Client::Open(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().code(), Code::kOk);
  EXPECT_TRUE(Contains(r.status().message(), file)) << r.status().ToString();
  // Below a file.
  c.scratch_dir = file + "/sub";
  r = Client::Open(c);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), file)) << r.status().ToString();
  // The persistent directory is checked the same way.
  c = MakeConfig();
  c.persistent_dir = file;
  r = Client::Open(c);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), file)) << r.status().ToString();
  // Nothing was changed: the file is still a file.
  EXPECT_TRUE(fs::is_regular_file(file));
}

TEST_F(ApiErrorsTest, InvalidConfigStructIsConfigError) {
  Config c = MakeConfig();
  c.host_cache_bytes = c.block_bytes;  // one block: too small
  auto r = Client::Open(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kConfig) << r.status().ToString();
  EXPECT_TRUE(Contains(r.status().message(), "host_cache")) << r.status().message();

  c = MakeConfig();
  c.block_bytes = 64 * kKiB + 1;
  r = Client::Open(c);
  EXPECT_EQ(r.status().code(), Code::kConfig) << r.status().ToString();

  c = MakeConfig();
  c.scratch_dir = "";
  r = Client::Open(c);
  EXPECT_EQ(r.status().code(), Code::kConfig) << r.status().ToString();

  c = MakeConfig();
  c.keep_versions = 0;
  r = Client::Open(c);
  EXPECT_EQ(r.status().code(), Code::kConfig) << r.status().ToString();

  c = MakeConfig();
  c.persistent_dir = c.scratch_dir;
  r = Client::Open(c);
  EXPECT_EQ(r.status().code(), Code::kConfig) << r.status().ToString();
  // The smallest valid cache works.
  c = MakeConfig();
  c.host_cache_bytes = 2 * c.block_bytes;
  auto ok = Client::Open(c);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)->GetStats().cache_capacity_bytes, 2 * c.block_bytes);
}

TEST_F(ApiErrorsTest, ProtectAndUnprotect) {
  auto client = OpenClient(MakeConfig());
  ASSERT_NE(client, nullptr);
  Status s = client->Protect(1, nullptr, 10);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_FALSE(s.message().empty());
  EXPECT_OK(client->Protect(2, nullptr, 0));  // an empty region
  s = client->Unprotect(42);
  EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "42")) << s.message();
  EXPECT_OK(client->Unprotect(2));
  EXPECT_EQ(client->Unprotect(2).code(), Code::kNotFound);
  // The rejected protect registered nothing: a checkpoint has no regions and
  // restores into none.
  EXPECT_OK(client->Checkpoint("empty", 0));
  EXPECT_OK(client->Wait("empty", 0, Level::kLocal));
  EXPECT_OK(client->Restore("empty", 0));
  // Unknown versions and names.
  EXPECT_EQ(client->Restore("empty", 1).code(), Code::kNotFound);
  EXPECT_EQ(client->Restore("nothing-here", 0).code(), Code::kNotFound);
  EXPECT_EQ(client->Latest("nothing-here").status().code(), Code::kNotFound);
  EXPECT_EQ(client->Wait("nothing-here", 0, Level::kLocal).code(), Code::kNotFound);
}

TEST_F(ApiErrorsTest, OpenHistoryTwiceIsState) {
  auto client = OpenClient(MakeConfig());
  ASSERT_NE(client, nullptr);
  auto h1 = client->OpenHistory("adj");
  ASSERT_TRUE(h1.ok()) << h1.status().ToString();
  auto h2 = client->OpenHistory("adj");
  ASSERT_FALSE(h2.ok());
  EXPECT_EQ(h2.status().code(), Code::kState) << h2.status().ToString();
  EXPECT_TRUE(Contains(h2.status().message(), "adj")) << h2.status().message();
  // Another name is fine; after closing, the name can be opened again.
  auto other = client->OpenHistory("adj2");
  EXPECT_TRUE(other.ok()) << other.status().ToString();
  ASSERT_OK((*h1)->Close());
  auto h3 = client->OpenHistory("adj");
  EXPECT_TRUE(h3.ok()) << h3.status().ToString();
}

TEST_F(ApiErrorsTest, HistoryAfterClientCloseIsState) {
  auto client = OpenClient(MakeConfig());
  ASSERT_NE(client, nullptr);
  auto h = client->OpenHistory("late");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  std::vector<uint8_t> data(100 * kKiB, 7);
  ASSERT_OK((*h)->Push(0, data.data(), data.size()));
  // Close() may report the dropped step's flush error (a known race; see
  // HistoryTest.CloseDuringStepFlushIsNoError): only the later calls matter here.
  (void)client->Close();

  EXPECT_EQ((*h)->Push(1, data.data(), data.size()).code(), Code::kState);
  EXPECT_EQ((*h)->Pop(0, data.data(), data.size()).status().code(), Code::kState);
  EXPECT_EQ((*h)->StepSize(0).status().code(), Code::kState);
  EXPECT_OK((*h)->Close());
  EXPECT_OK((*h)->Close());
  // The History may even outlive its Client.
  client.reset();
  EXPECT_EQ((*h)->Push(2, data.data(), data.size()).code(), Code::kState);
  h->reset();
}

TEST_F(ApiErrorsTest, HistoryOutlivingClientWithoutClose) {
  auto client = OpenClient(MakeConfig());
  ASSERT_NE(client, nullptr);
  auto h = client->OpenHistory("orphan");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  std::vector<uint8_t> data(10 * kKiB, 3);
  ASSERT_OK((*h)->Push(0, data.data(), data.size()));
  client.reset();  // destructor closes
  EXPECT_EQ((*h)->Pop(0, data.data(), data.size()).status().code(), Code::kState);
  EXPECT_OK((*h)->Close());
}

}  // namespace
}  // namespace cairn
