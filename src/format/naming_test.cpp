#include "format/naming.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <string>

namespace cairn::format {
namespace {

TEST(FormatNaming, ValidNames) {
  for (const char* n : {"a", "run", "my-sim_2024.v3", "x.y", "Ünïcödé", "a b", "a..", "..a"}) {
    Status s = ValidateName(n);
    const bool want = std::string(n).find("..") == std::string::npos;
    EXPECT_EQ(want, s.ok()) << n << ": " << s.ToString();
  }
  EXPECT_TRUE(ValidateName(std::string(128, 'x')).ok());
}

TEST(FormatNaming, InvalidNamesSayWhichRule) {
  struct Case {
    std::string name;
    const char* why;
  };
  const Case cases[] = {
      {"", "empty"},
      {std::string(129, 'x'), "at most 128"},
      {".", "reserved"},
      {"..", "reserved"},
      {".hidden", "starts with '.'"},
      {"a..b", "\"..\""},
      {"a/b", "'/'"},
      {"/", "'/'"},
      {std::string("a\0b", 3), "control character 0x00"},
      {"tab\there", "control character 0x09"},
      {"del\x7f", "control character 0x7f"},
  };
  for (const Case& c : cases) {
    Status s = ValidateName(c.name);
    EXPECT_EQ(Code::kInvalidArgument, s.code()) << c.name;
    EXPECT_NE(std::string::npos, s.message().find(c.why)) << s.message();
  }
}

TEST(FormatNaming, FileNames) {
  EXPECT_EQ("v00000000000000000042.cairn", EntryFileName(EntryKind::kCheckpoint, 42));
  EXPECT_EQ("h00000000000000000000.cairn", EntryFileName(EntryKind::kHistoryStep, 0));
  EXPECT_EQ("/d/run/v00000000000000000007.cairn",
            EntryPath("/d", "run", EntryKind::kCheckpoint, 7));
  EXPECT_EQ("/d/run/h00000000000000000007.cairn",
            EntryPath("/d/", "run", EntryKind::kHistoryStep, 7));
}

TEST(FormatNaming, ParseRoundTrip) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  for (EntryKind k : {EntryKind::kCheckpoint, EntryKind::kHistoryStep}) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{9}, int64_t{10}, int64_t{123456789},
                      int64_t{1} << 40, max - 1, max}) {
      const std::string f = EntryFileName(k, n);
      auto p = ParseEntryFileName(f);
      ASSERT_TRUE(p.has_value()) << f;
      EXPECT_EQ(k, p->kind) << f;
      EXPECT_EQ(n, p->number) << f;
    }
  }
  // Names sort in numeric order.
  EXPECT_LT(EntryFileName(EntryKind::kCheckpoint, 9), EntryFileName(EntryKind::kCheckpoint, 10));
}

TEST(FormatNaming, ParseRejectsOtherFiles) {
  for (const char* f : {"", "v.cairn", "v0000000000000000042.cairn",   // 19 digits
                        "v000000000000000000042.cairn",                 // 21 digits
                        "x00000000000000000042.cairn", "V00000000000000000042.cairn",
                        "v00000000000000000042.cairm", "v00000000000000000042.cairn.tmp",
                        "v0000000000000000004a.cairn", "v-0000000000000000042.cairn",
                        "v99999999999999999999.cairn",  // > int64 max
                        "v09223372036854775808.cairn",  // int64 max + 1
                        ".v00000000000000000042.cairn.123.tmp", "notes.txt"}) {
    EXPECT_FALSE(ParseEntryFileName(f).has_value()) << f;
  }
}

TEST(FormatNaming, TempFileNames) {
  long pid = 0;
  EXPECT_TRUE(IsTempFileName(".v00000000000000000042.cairn.12345.tmp", &pid));
  EXPECT_EQ(12345, pid);
  EXPECT_TRUE(IsTempFileName(".h00000000000000000001.cairn.7.tmp", &pid));
  EXPECT_EQ(7, pid);
  EXPECT_TRUE(IsTempFileName(".h00000000000000000001.cairn.7.tmp", nullptr));
  pid = -1;
  for (const char* f : {"v00000000000000000042.cairn", ".v00000000000000000042.cairn.tmp",
                        ".v00000000000000000042.cairn.0.tmp", ".v00000000000000000042.cairn.x1.tmp",
                        "v00000000000000000042.cairn.12.tmp", ".foo.12.tmp", ".tmp", ".12.tmp",
                        ".v00000000000000000042.cairn.12.tmpx", ".v00000000000000000042.cairn.-3.tmp"}) {
    EXPECT_FALSE(IsTempFileName(f, &pid)) << f;
  }
  EXPECT_EQ(-1, pid);  // untouched on failure
}

}  // namespace
}  // namespace cairn::format
