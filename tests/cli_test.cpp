// End-to-end tests of the `cairn` tool: files are made with FileWriter in a
// temporary directory, then the built binary (test::kBinDir/cairn) is run on
// them and its output and exit status checked.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "format/chain.hpp"
#include "format/file_reader.hpp"
#include "format/file_writer.hpp"
#include "format/naming.hpp"
#include "format/placement.hpp"
#include "testing/test_paths.hpp"
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
    bin_ = std::string(test::kBinDir) + "/cairn";
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
      r.out, std::regex("\nsim +version +2 +[0-9]+ +- +- +- +damaged: header checksum mismatch")))
      << r.out;
  EXPECT_EQ(0, CountLines(r.out, "notes"));
  EXPECT_EQ(1 + 6 + 2, CountLines(r.out, ""));
}

// libcairn_veloc's and libcairn_fti's numbers (docs/format.md 3.10): ls
// names the peer's id and the checkpoint's count beside the Cairn number.
TEST_F(CliTest, LsNamesTheDropInIds) {
  Write("sim", EntryKind::kCheckpoint, (int64_t{3} << 32) | 1);
  CliRun r = Cairn("ls " + Quote(dir_));
  ASSERT_EQ(0, r.code) << r.err;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\nsim +version +12884901889 .* ok; drop-in id 1, checkpoint 3\n")))
      << r.out;
  EXPECT_EQ(1, CountLines(r.out, "drop-in id"));  // Cairn's own numbers have none
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
        std::string("{\"id\": 3, \"memory\": \"host\", \"bytes\": 20000, \"blocks\": 3,"),
        std::string("{\"id\": 8, \"memory\": \"host\", \"bytes\": 0, \"blocks\": 0,"),
        std::string("{\"id\": 9, \"memory\": \"host\", \"bytes\": 9000, \"blocks\": 2,"),
        std::string("\"depth\": 0,"), std::string("\"base\": null,")}) {
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

// The keys scripts rely on: "placement" per region, "affinity".
TEST_F(CliTest, InfoShowsPlacementAndAffinity) {
  CliRun none = Cairn("info " + Quote(dir_) + " sim 2");
  ASSERT_EQ(0, none.code) << none.err;
  EXPECT_NE(std::string::npos, none.out.find("\"affinity\": null,")) << none.out;
  EXPECT_NE(std::string::npos, none.out.find("\"extents\": 1, \"placement\": null}")) << none.out;

  const std::string data = Path("sim", EntryKind::kCheckpoint, 2);
  auto reader = format::FileReader::Open(os::FileSystem::Default(), data);
  ASSERT_TRUE(reader.ok());
  format::Placement p{.number = 2, .data_created_ns = (*reader)->info().created_unix_ns, .node_count = 2,
                      .cpu_count = 8};
  p.regions.push_back({.id = 3, .bytes = 20000, .runs = {{1, 8192}, {0, 11808}}});
  p.threads.push_back({.index = -1, .cpus = {0, 1, 2, 5}});
  p.threads.push_back({.index = 0, .cpus = {4}});
  ASSERT_TRUE(format::WritePlacement(os::FileSystem::Default(), format::PlacementPathOf(data), p).ok());
  CliRun r = Cairn("info " + Quote(dir_) + " sim 2");
  ASSERT_EQ(0, r.code) << r.err;
  for (const std::string& want :
       {std::string("\"affinity\": [{\"thread\": -1, \"cpus\": \"0-2,5\"}, {\"thread\": 0, \"cpus\": \"4\"}],"),
        std::string("\"placement_nodes\": 2,"),
        std::string("\"placement\": [{\"node\": 1, \"bytes\": 8192}, {\"node\": 0, \"bytes\": 11808}]}"),
        std::string("{\"id\": 9, \"memory\": \"host\", \"bytes\": 9000, \"blocks\": 2, \"stored_bytes\": 9000, "
                    "\"extents\": 1, \"placement\": null}")}) {
    EXPECT_NE(std::string::npos, r.out.find(want)) << want << "\n" << r.out;
  }
  // A record of another file of version 2 is reported, not used.
  p.data_created_ns += 1;
  ASSERT_TRUE(format::WritePlacement(os::FileSystem::Default(), format::PlacementPathOf(data), p).ok());
  CliRun stale = Cairn("info " + Quote(dir_) + " sim 2");
  ASSERT_EQ(0, stale.code) << stale.err;
  EXPECT_NE(std::string::npos, stale.out.find("\"placement_error\": ")) << stale.out;
  EXPECT_NE(std::string::npos, stale.out.find("\"affinity\": null,")) << stale.out;
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

// ---- Layered versions (format version 2) --------------------------------------

TEST_F(CliTest, VerifyFailsWhenNothingIsVerified) {
  // The parent of a Cairn directory: verify finds the directory below it.
  ASSERT_TRUE(os::FileSystem::Default()->CreateDirs(dir_ + "/outer/empty", 0700).ok());
  ASSERT_TRUE(os::FileSystem::Default()->CreateDirs(dir_ + "/outer/scratch", 0700).ok());
  fs::copy(dir_ + "/sim", dir_ + "/outer/scratch/sim", fs::copy_options::recursive);
  CliRun parent = Cairn("verify " + Quote(dir_ + "/outer"));
  EXPECT_EQ(0, parent.code) << parent.out << parent.err;
  EXPECT_NE(std::string::npos, parent.out.find("5 files verified, 0 damaged")) << parent.out;
  EXPECT_NE(std::string::npos, parent.out.find(dir_ + "/outer/scratch/sim/v"));

  for (const std::string& d : {dir_ + "/outer/empty", dir_ + "/sim"}) {
    CliRun r = Cairn("verify " + Quote(d));
    EXPECT_EQ(1, r.code) << d << "\n" << r.out;
    EXPECT_NE(std::string::npos, r.out.find("0 files verified"));
    EXPECT_NE(std::string::npos, r.err.find("no Cairn files in " + d + " or below")) << r.err;
  }
  CliRun name = Cairn("verify " + Quote(dir_) + " nosuchname");
  EXPECT_EQ(1, name.code);
}

// A chain of "lay": v1 full (format version 2), v2 and v3 layered, v4 on v3.
class CliChainTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    ASSERT_TRUE(os::FileSystem::Default()->CreateDirs(dir_ + "/lay", 0700).ok());
    content_.assign(50000, 1);
    WriteLayer(1, {{0, 50000}}, format::VersionRecord{});
    content_[100] = 2;
    WriteLayer(2, {{100, 1}}, On(1, 1));
    for (int i = 30000; i < 30100; ++i) content_[i] = 3;
    WriteLayer(3, {{30000, 100}}, On(2, 2));
    v3_ = content_;
    content_[7] = 4;
    WriteLayer(4, {{7, 1}}, On(3, 3));
  }
  format::VersionRecord On(int64_t base, uint32_t depth) {
    return format::VersionRecord{0, base, ids_[base], depth};
  }
  void WriteLayer(int64_t v, const ExtentList& extents, format::VersionRecord rec) {
    const std::vector<format::RegionSpec> regions{{5, MemoryKind::kHost, 50000}};
    const format::Layout l = format::Layout::MakeV2(regions, {extents}, 8192, rec);
    format::FileInfo info;
    info.name = "lay";
    info.number = v;
    auto w = format::FileWriter::Create(os::FileSystem::Default(), Path("lay", EntryKind::kCheckpoint, v),
                                        info, l, format::WriterOptions{});
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    std::vector<uint8_t> packed;
    for (const Extent& e : extents) {
      packed.insert(packed.end(), content_.begin() + e.offset, content_.begin() + e.end());
    }
    for (uint32_t i = 0; i < l.blocks.size(); ++i) {
      const uint8_t* p = packed.data() + uint64_t{i} * 8192;
      ASSERT_TRUE((*w)->WriteBlock(i, p, crc32c::Value(p, l.blocks[i].length)).ok());
    }
    ids_[v] = (*w)->content_id();
    ASSERT_TRUE((*w)->Commit().ok());
  }
  std::vector<uint8_t> Restore(int64_t v) {
    std::vector<uint8_t> out(50000, 0xee);
    auto chain = format::Chain::Open(os::FileSystem::Default(), dir_, "lay", v);
    EXPECT_TRUE(chain.ok()) << chain.status().ToString();
    if (!chain.ok()) return {};
    const format::RegionTarget t{5, out.data()};
    EXPECT_TRUE(format::RestoreChain(os::FileSystem::Default(), *chain, {&t, 1}).ok());
    return out;
  }
  std::string V(int64_t v) const { return Path("lay", EntryKind::kCheckpoint, v); }

  std::vector<uint8_t> content_, v3_;
  std::map<int64_t, uint64_t> ids_;
};

TEST_F(CliChainTest, LsAndInfoShowLayers) {
  CliRun ls = Cairn("ls " + Quote(dir_));
  ASSERT_EQ(0, ls.code) << ls.err;
  EXPECT_NE(std::string::npos, ls.out.find("DEPTH  LOGICAL  STORED  STATE"));
  EXPECT_TRUE(std::regex_search(ls.out, std::regex("\nlay +version +1 +[0-9]+ +0 +50000 +50000 +ok")))
      << ls.out;
  EXPECT_TRUE(std::regex_search(ls.out, std::regex("\nlay +version +3 +[0-9]+ +2 +50000 +100 +ok")));
  EXPECT_TRUE(std::regex_search(ls.out, std::regex("\nsim +version +1 +[0-9]+ +0 +29000 +29000 +ok")));

  CliRun info = Cairn("info " + Quote(dir_) + " lay 3");
  ASSERT_EQ(0, info.code) << info.err;
  char base[96];
  std::snprintf(base, sizeof base, "\"base\": {\"version\": 2, \"content_id\": \"0x%016llx\"}",
                static_cast<unsigned long long>(ids_[2]));
  for (const std::string& want :
       {std::string("\"format_version\": 2"), std::string("\"depth\": 2,"),
        std::string("\"stored_bytes\": 100,"), std::string(base),
        std::string("\"chain\": [3, 2, 1],"), std::string("\"stored_bytes\": 100, \"extents\": 1, \"placement\": null}")}) {
    EXPECT_NE(std::string::npos, info.out.find(want)) << want << "\n" << info.out;
  }
}

TEST_F(CliChainTest, VerifyNamesTheBrokenLink) {
  CliRun ok = Cairn("verify " + Quote(dir_) + " lay");
  EXPECT_EQ(0, ok.code) << ok.out;
  EXPECT_EQ(4, CountLines(ok.out, ": ok"));

  FlipByte(V(1), 4096 + 8192 + 5);  // block 1 of the full version
  CliRun damaged = Cairn("verify " + Quote(dir_) + " lay 3");
  EXPECT_EQ(1, damaged.code);
  EXPECT_NE(std::string::npos, damaged.out.find(V(3) + ": v2 -> base v1: " + V(1) + ": block 1"))
      << damaged.out;
  CliRun all = Cairn("verify " + Quote(dir_));
  EXPECT_NE(std::string::npos, all.out.find("10 files verified, 4 damaged")) << all.out;

  ASSERT_TRUE(fs::remove(V(1)));
  CliRun missing = Cairn("verify " + Quote(dir_) + " lay 4");
  EXPECT_EQ(1, missing.code);
  EXPECT_NE(std::string::npos,
            missing.out.find(V(2) + ": v2 -> base v1: missing (" + V(1) + ")")) << missing.out;
  CliRun ls = Cairn("ls " + Quote(dir_));
  EXPECT_EQ(3, CountLines(ls.out, "v2 -> base v1: missing")) << ls.out;
  EXPECT_EQ(3, CountLines(ls.out, "broken chain: ")) << ls.out;
}

TEST_F(CliChainTest, CompactReplacesTheTipAndKeepsLayersOnItValid) {
  CliRun r = Cairn("compact " + Quote(dir_) + " lay 3");
  ASSERT_EQ(0, r.code) << r.out << r.err;
  EXPECT_NE(std::string::npos, r.out.find(V(3) + ": compacted (depth 2 -> 0,")) << r.out;
  EXPECT_EQ(0, Cairn("verify " + Quote(dir_) + " lay 3").code);
  ASSERT_TRUE(fs::remove(V(1)));
  ASSERT_TRUE(fs::remove(V(2)));
  EXPECT_EQ(v3_, Restore(3));
  EXPECT_EQ(content_, Restore(4));  // v4 still names v3's content id
  CliRun verify = Cairn("verify " + Quote(dir_) + " lay");
  EXPECT_EQ(0, verify.code) << verify.out;
  CliRun again = Cairn("compact " + Quote(dir_) + " lay 3");
  EXPECT_EQ(0, again.code);
  EXPECT_NE(std::string::npos, again.out.find("already a full version"));
  EXPECT_EQ(1, Cairn("compact " + Quote(dir_) + " lay 9").code);
  EXPECT_EQ(2, Cairn("compact " + Quote(dir_) + " lay").code);
  // No temp file is left behind.
  for (const auto& e : fs::directory_iterator(dir_ + "/lay")) {
    EXPECT_EQ(std::string::npos, e.path().filename().string().find(".tmp")) << e.path();
  }
}

TEST_F(CliChainTest, GcKeepsTheBasesOfKeptVersions) {
  CliRun r = Cairn("gc " + Quote(dir_) + " --keep 1");
  EXPECT_EQ(0, r.code) << r.err;
  for (int64_t v = 1; v <= 4; ++v) EXPECT_TRUE(fs::exists(V(v))) << v;
  EXPECT_NE(std::string::npos, r.out.find("kept " + V(1) + " (base of a kept version)"));
  ASSERT_EQ(0, Cairn("compact " + Quote(dir_) + " lay 4").code);
  CliRun after = Cairn("gc " + Quote(dir_) + " --keep 1");
  EXPECT_EQ(0, after.code);
  for (int64_t v = 1; v <= 3; ++v) EXPECT_FALSE(fs::exists(V(v))) << v;
  EXPECT_EQ(content_, Restore(4));
}

// v6 opens but its base v5 is gone: it is kept (for inspection) but does not
// count as one of the N good versions, so v4's chain stays.
TEST_F(CliChainTest, GcCountsOnlyVersionsWhoseChainIsWhole) {
  WriteLayer(5, {{0, 50000}}, format::VersionRecord{});
  WriteLayer(6, {{7, 1}}, On(5, 1));
  ASSERT_TRUE(fs::remove(V(5)));
  CliRun r = Cairn("gc " + Quote(dir_) + " --keep 1");
  EXPECT_EQ(0, r.code) << r.err;
  for (int64_t v : {1, 2, 3, 4, 6}) EXPECT_TRUE(fs::exists(V(v))) << v << "\n" << r.out;
  EXPECT_EQ(content_, Restore(4));
}

}  // namespace
}  // namespace cairn
