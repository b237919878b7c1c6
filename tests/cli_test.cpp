// End-to-end tests of the `cairn` tool: files are made with FileWriter in a
// temporary directory, then the built binary (CAIRN_BIN_DIR/cairn) is run on
// them and its output and exit status checked.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "format/file_writer.hpp"
#include "format/naming.hpp"
#include "util/crc32c.hpp"

namespace cairn {
namespace {

namespace fs = std::filesystem;
using format::EntryKind;

struct CliRun {
  int code = -1;
  std::string out, err;
};

std::string Quote(const std::string& s) { return "'" + s + "'"; }

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bin_ = std::string(CAIRN_BIN_DIR) + "/cairn";
    ASSERT_TRUE(fs::exists(bin_)) << bin_ << " not built";
    std::string tmpl = ::testing::TempDir() + "cairn_cli_test.XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(tmpl.data()));
    dir_ = tmpl;
    ASSERT_TRUE(os::FileSystem::Default()->CreateDirs(dir_ + "/sim", 0700).ok());
    ASSERT_TRUE(os::FileSystem::Default()->CreateDirs(dir_ + "/other", 0700).ok());
    for (int64_t v = 1; v <= 4; ++v) Write("sim", EntryKind::kCheckpoint, v);
    Write("sim", EntryKind::kHistoryStep, 5);
    Write("other", EntryKind::kCheckpoint, 7);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Three regions (ids 3, 8, 9) of 20000, 0 and 9000 bytes in 8 KiB blocks:
  // blocks 0-2 belong to id 3, blocks 3-4 to id 9.
  void Write(const std::string& name, EntryKind kind, int64_t number) {
    format::Layout layout = format::Layout::Make(
        {{3, MemoryKind::kHost, 20000}, {8, MemoryKind::kHost, 0}, {9, MemoryKind::kHost, 9000}},
        8192);
    format::FileInfo info;
    info.kind = kind;
    info.name = name;
    info.number = number;
    const std::string path = format::EntryPath(dir_, name, kind, number);
    auto w = format::FileWriter::Create(os::FileSystem::Default(), path, info, layout,
                                        format::WriterOptions{});
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    std::vector<uint8_t> buf(8192);
    for (uint32_t i = 0; i < layout.blocks.size(); ++i) {
      for (size_t j = 0; j < buf.size(); ++j) buf[j] = static_cast<uint8_t>(i * 31 + j + number);
      const uint32_t len = layout.blocks[i].length;
      ASSERT_TRUE((*w)->WriteBlock(i, buf.data(), crc32c::Value(buf.data(), len)).ok());
    }
    ASSERT_TRUE((*w)->Commit().ok());
  }

  std::string Path(const std::string& name, EntryKind kind, int64_t number) const {
    return format::EntryPath(dir_, name, kind, number);
  }

  static void FlipByte(const std::string& path, uint64_t offset) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << path;
    f.seekg(static_cast<std::streamoff>(offset));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x40);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(&c, 1);
  }

  static void Touch(const std::string& path) { std::ofstream(path) << "partial"; }

  CliRun Cairn(const std::string& args) const {
    CliRun r;
    const std::string err_file = dir_ + "/.stderr";
    const std::string cmd = Quote(bin_) + " " + args + " 2>" + Quote(err_file);
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) return r;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int status = pclose(p);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream e(err_file);
    std::stringstream ss;
    ss << e.rdbuf();
    r.err = ss.str();
    fs::remove(err_file);
    return r;
  }

  static int CountLines(const std::string& s, const std::string& needle) {
    int n = 0;
    std::istringstream in(s);
    for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
    return n;
  }

  // A pid that certainly belonged to a process that has exited.
  static long DeadPid() {
    const pid_t child = fork();
    if (child == 0) _exit(0);
    int status = 0;
    waitpid(child, &status, 0);
    return child;
  }

  std::string bin_, dir_;
};

TEST_F(CliTest, HelpAndUsageErrors) {
  CliRun help = Cairn("--help");
  EXPECT_EQ(0, help.code);
  EXPECT_NE(std::string::npos, help.out.find("cairn verify DIR"));
  EXPECT_EQ(0, Cairn("help").code);

  CliRun unknown = Cairn("frobnicate " + Quote(dir_));
  EXPECT_EQ(2, unknown.code);
  EXPECT_NE(std::string::npos, unknown.err.find("unknown command 'frobnicate'"));
  EXPECT_NE(std::string::npos, unknown.err.find("usage:"));
  EXPECT_TRUE(unknown.out.empty());

  EXPECT_EQ(2, Cairn("").code);
  EXPECT_EQ(2, Cairn("verify").code);
  EXPECT_EQ(2, Cairn("verify " + Quote(dir_) + " sim x7").code);
  EXPECT_EQ(2, Cairn("info " + Quote(dir_) + " sim").code);
  EXPECT_EQ(2, Cairn("gc " + Quote(dir_)).code);
  EXPECT_EQ(2, Cairn("gc " + Quote(dir_) + " --keep 0").code);
  EXPECT_EQ(1, Cairn("ls " + Quote(dir_ + "/nonexistent")).code);
}

TEST_F(CliTest, VerifyAllOk) {
  CliRun r = Cairn("verify " + Quote(dir_));
  EXPECT_EQ(0, r.code) << r.out << r.err;
  EXPECT_EQ(6, CountLines(r.out, ": ok"));
  EXPECT_NE(std::string::npos, r.out.find(Path("sim", EntryKind::kHistoryStep, 5) + ": ok"));
  EXPECT_NE(std::string::npos, r.out.find("6 files verified, 0 damaged"));

  CliRun one = Cairn("verify " + Quote(dir_) + " sim 2");
  EXPECT_EQ(0, one.code);
  EXPECT_EQ(Path("sim", EntryKind::kCheckpoint, 2) + ": ok\n1 file verified, 0 damaged\n", one.out);

  CliRun name = Cairn("verify " + Quote(dir_) + " other");
  EXPECT_EQ(0, name.code);
  EXPECT_EQ(1, CountLines(name.out, ": ok"));

  CliRun missing = Cairn("verify " + Quote(dir_) + " sim 99");
  EXPECT_EQ(1, missing.code);
  EXPECT_NE(std::string::npos, missing.err.find("v00000000000000000099.cairn"));
}

TEST_F(CliTest, VerifyNamesTheDamagedBlock) {
  // Block 2 is the last block of region id 3, at 4096 + 2 * 8192.
  const std::string v3 = Path("sim", EntryKind::kCheckpoint, 3);
  FlipByte(v3, 4096 + 2 * 8192 + 100);
  CliRun r = Cairn("verify " + Quote(dir_));
  EXPECT_EQ(1, r.code) << r.out;
  EXPECT_NE(std::string::npos,
            r.out.find(v3 + ": block 2 (region id 3, file offset 20480, 3616 bytes): checksum "
                            "mismatch"))
      << r.out;
  EXPECT_EQ(5, CountLines(r.out, ": ok"));
  EXPECT_NE(std::string::npos, r.out.find("6 files verified, 1 damaged"));
  EXPECT_EQ(1, Cairn("verify " + Quote(dir_) + " sim 3").code);
  EXPECT_EQ(0, Cairn("verify " + Quote(dir_) + " sim 4").code);
  // Block damage is invisible to ls (footer-level check only).
  CliRun ls = Cairn("ls " + Quote(dir_));
  EXPECT_EQ(0, ls.code);
  EXPECT_EQ(0, CountLines(ls.out, "damaged"));
}

TEST_F(CliTest, LsShowsKindsStatesAndTemps) {
  const long dead = DeadPid();
  const std::string name_dir = dir_ + "/sim/";
  Touch(name_dir + ".v00000000000000000009.cairn." + std::to_string(dead) + ".tmp");
  Touch(name_dir + ".v00000000000000000010.cairn." + std::to_string(getpid()) + ".tmp");
  Touch(name_dir + "notes.txt");  // foreign: not listed
  FlipByte(Path("sim", EntryKind::kCheckpoint, 2), 20);  // header field
  CliRun r = Cairn("ls " + Quote(dir_));
  ASSERT_EQ(0, r.code) << r.err;
  EXPECT_EQ(0u, r.out.find("NAME"));
  EXPECT_EQ(4 + 2, CountLines(r.out, "sim    version"));  // two are temps
  EXPECT_EQ(1, CountLines(r.out, "sim    step"));
  EXPECT_EQ(1, CountLines(r.out, "other  version"));
  EXPECT_EQ(1, CountLines(r.out, "temp (pid " + std::to_string(dead) + " dead)"));
  EXPECT_EQ(1, CountLines(r.out, "temp (pid " + std::to_string(getpid()) + " alive)"));
  EXPECT_EQ(1, CountLines(r.out, "damaged"));
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex("\nsim +version +2 +[0-9]+ +damaged: header checksum mismatch")))
      << r.out;
  EXPECT_EQ(0, CountLines(r.out, "notes"));
  EXPECT_EQ(1 + 6 + 2, CountLines(r.out, ""));
}

TEST_F(CliTest, InfoPrintsJson) {
  CliRun r = Cairn("info " + Quote(dir_) + " sim 2");
  ASSERT_EQ(0, r.code) << r.err;
  for (const std::string& want :
       {std::string("\"name\": \"sim\""), std::string("\"version\": 2,"),
        std::string("\"kind\": \"checkpoint\""),
        "\"file\": \"" + Path("sim", EntryKind::kCheckpoint, 2) + "\"",
        std::string("\"payload_bytes\": 29000,"), std::string("\"block_bytes\": 8192,"),
        std::string("\"format_version\": 1"),
        std::string("{\"id\": 3, \"memory\": \"host\", \"bytes\": 20000, \"blocks\": 3}"),
        std::string("{\"id\": 8, \"memory\": \"host\", \"bytes\": 0, \"blocks\": 0}"),
        std::string("{\"id\": 9, \"memory\": \"host\", \"bytes\": 9000, \"blocks\": 2}")}) {
    EXPECT_NE(std::string::npos, r.out.find(want)) << want << "\n" << r.out;
  }
  const uint64_t size = fs::file_size(Path("sim", EntryKind::kCheckpoint, 2));
  EXPECT_NE(std::string::npos, r.out.find("\"file_bytes\": " + std::to_string(size) + ","));
  EXPECT_EQ('{', r.out.front());
  EXPECT_EQ("}\n", r.out.substr(r.out.size() - 2));

  const std::string v1 = Path("sim", EntryKind::kCheckpoint, 1);
  fs::resize_file(v1, 8192);
  CliRun bad = Cairn("info " + Quote(dir_) + " sim 1");
  EXPECT_EQ(1, bad.code);
  EXPECT_NE(std::string::npos, bad.err.find(v1 + ": file truncated: 8192 bytes")) << bad.err;
  EXPECT_EQ(1, Cairn("info " + Quote(dir_) + " sim 42").code);
}

TEST_F(CliTest, GcKeepsNewestGoodVersionsAndRemovesDeadTemps) {
  const long dead = DeadPid();
  const std::string dead_temp =
      dir_ + "/sim/.v00000000000000000009.cairn." + std::to_string(dead) + ".tmp";
  const std::string live_temp =
      dir_ + "/sim/.v00000000000000000010.cairn." + std::to_string(getpid()) + ".tmp";
  Touch(dead_temp);
  Touch(live_temp);
  // v4 is damaged: it does not count towards the kept ones and stays.
  const std::string v4 = Path("sim", EntryKind::kCheckpoint, 4);
  FlipByte(v4, fs::file_size(v4) - 10);

  CliRun dry = Cairn("gc " + Quote(dir_) + " --keep 2 --min-temp-age 0 --dry-run");
  EXPECT_EQ(0, dry.code) << dry.err;
  EXPECT_EQ(2, CountLines(dry.out, "would remove"));
  EXPECT_TRUE(fs::exists(Path("sim", EntryKind::kCheckpoint, 1)));

  // The temp is younger than the default minimum age: left alone.
  CliRun young = Cairn("gc " + Quote(dir_) + " --keep 2");
  EXPECT_EQ(0, young.code);
  EXPECT_TRUE(fs::exists(dead_temp));

  CliRun r = Cairn("gc " + Quote(dir_) + " --keep 2 --min-temp-age 0");
  EXPECT_EQ(0, r.code) << r.err;
  EXPECT_FALSE(fs::exists(Path("sim", EntryKind::kCheckpoint, 1)));
  EXPECT_TRUE(fs::exists(Path("sim", EntryKind::kCheckpoint, 2)));
  EXPECT_TRUE(fs::exists(Path("sim", EntryKind::kCheckpoint, 3)));
  EXPECT_TRUE(fs::exists(v4));
  EXPECT_TRUE(fs::exists(Path("sim", EntryKind::kHistoryStep, 5)));
  EXPECT_TRUE(fs::exists(Path("other", EntryKind::kCheckpoint, 7)));
  EXPECT_FALSE(fs::exists(dead_temp));
  EXPECT_TRUE(fs::exists(live_temp));

  CliRun again = Cairn("gc " + Quote(dir_) + " --keep 1 --min-temp-age 0");
  EXPECT_EQ(0, again.code);
  EXPECT_FALSE(fs::exists(Path("sim", EntryKind::kCheckpoint, 2)));
  EXPECT_TRUE(fs::exists(Path("sim", EntryKind::kCheckpoint, 3)));
  EXPECT_TRUE(fs::exists(v4));
  EXPECT_NE(std::string::npos, again.out.find("removed " + Path("sim", EntryKind::kCheckpoint, 2)));
}

}  // namespace
}  // namespace cairn
