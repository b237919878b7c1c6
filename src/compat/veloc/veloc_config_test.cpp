// VELOC's configuration file read into Cairn's settings (src/compat/
// veloc_config.cpp, docs/veloc.md "Configuration"): every bad file gives an
// error naming the line and the key. Pure: the MPI side (every rank fails
// VELOC_Init, no hang) is tests/compat/veloc_config.sh.
#include <gtest/gtest.h>

#include <climits>
#include <string>

#include "compat/veloc/veloc_config.hpp"

namespace cairn::veloc {
namespace {

const std::string kDirs = "scratch = /tmp/s\npersistent = /tmp/p\n";

void ExpectError(const std::string& text, const std::string& want) {
  auto c = ParseVelocConfig(text, "v.cfg");
  ASSERT_FALSE(c.ok()) << text;
  EXPECT_NE(c.status().message().find(want), std::string::npos) << c.status().message();
}

TEST(VelocConfig, ReadsVelocsKeys) {
  auto c = ParseVelocConfig(kDirs + "mode = sync\nmax_versions = 3\n", "v.cfg");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->cairn.scratch_dir, "/tmp/s");
  EXPECT_EQ(c->cairn.persistent_dir, "/tmp/p");
  EXPECT_TRUE(c->sync);
  EXPECT_EQ(c->cairn.keep_versions, 3);
  auto all = ParseVelocConfig(kDirs + "mode = async ; inline comment\n", "v.cfg");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_FALSE(all->sync);
  EXPECT_EQ(all->cairn.keep_versions, INT_MAX);  // no max_versions: keep all, as VELOC
}

TEST(VelocConfig, NotesIgnoredKeys) {
  auto c = ParseVelocConfig(kDirs + "; a comment\nchksum = true\nec_interval = 0   # inline\n", "v.cfg");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->notes.size(), 2u);  // ec_interval and chksum, in the key table's order
  EXPECT_NE(c->notes[0].find("v.cfg:5: 'ec_interval' is ignored under Cairn"), std::string::npos) << c->notes[0];
  EXPECT_NE(c->notes[1].find("v.cfg:4: 'chksum' is ignored under Cairn"), std::string::npos) << c->notes[1];
}

TEST(VelocConfig, RejectsBadFilesNamingTheProblem) {
  ExpectError("scrach = /tmp/s\npersistent = /tmp/p\n", "v.cfg:1: unknown key 'scrach'");
  ExpectError("scratch = /tmp/s\n", "'persistent' is missing or empty");
  ExpectError("scratch =\npersistent = /tmp/p\n", "'scratch' is missing or empty");
  ExpectError(kDirs + "mode = fast\n", "v.cfg:3: mode = 'fast' is invalid, must be sync or async");
  ExpectError(kDirs + "max_versions = -1\n", "max_versions = '-1' is not a count");
  ExpectError("[veloc]\n" + kDirs, "VELOC's configuration has no sections");
  ExpectError(kDirs + "scratch = /tmp/t\n", "v.cfg:3: 'scratch' is set twice (first at v.cfg:1)");
  ExpectError(kDirs + "scratch_only\n", "is not a key = value line");
  ExpectError("scratch = /tmp/s\npersistent = /tmp/s\n", "storage.persistent");
}

TEST(VelocConfig, MissingFileIsNamed) {
  auto c = LoadVelocConfig("/nonexistent/veloc.cfg");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("cannot open VELOC configuration file '/nonexistent/veloc.cfg'"),
            std::string::npos)
      << c.status().message();
  EXPECT_FALSE(LoadVelocConfig(nullptr).ok());
}

}  // namespace
}  // namespace cairn::veloc
