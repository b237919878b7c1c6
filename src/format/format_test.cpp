// FileWriter / FileReader: round trips, crash consistency of the commit, and
// detection of every kind of damage. Most tests run on an in-memory file
// system that rejects misaligned direct writes, so that the writer's 4096-byte
// discipline is checked; one runs on the real POSIX layer.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "format/codec.hpp"
#include "format/file_reader.hpp"
#include "format/file_writer.hpp"
#include "testing/fs/mem_fs.hpp"
#include "format/naming.hpp"
#include "util/crc32c.hpp"

namespace cairn::format {
namespace {

using testing::Bytes;
using testing::MemFs;

// ---- Helpers ----------------------------------------------------------------

constexpr uint32_t kBlock = 16384;
const std::string kDir = "/store/run";
const std::string kPath = kDir + "/v00000000000000000003.cairn";

// Odd sizes: empty, one byte, exactly a block, a block and a byte, several
// blocks with a short tail, and a negative id.
std::vector<RegionSpec> OddRegions() {
  return {{1, MemoryKind::kHost, 0},          {2, MemoryKind::kHost, 1},
          {3, MemoryKind::kHost, kBlock},     {4, MemoryKind::kDevice, kBlock + 1},
          {5, MemoryKind::kHost, 3 * kBlock + 1000}, {-7, MemoryKind::kManaged, 5000}};
}

struct Payload {
  Layout layout;
  std::vector<Bytes> regions;  // content of each region
};

Payload MakePayload(const std::vector<RegionSpec>& specs, uint32_t seed) {
  Payload p;
  p.layout = Layout::Make(specs, kBlock);
  std::mt19937 rng(seed);
  for (const RegionSpec& s : specs) {
    Bytes b(s.bytes);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    p.regions.push_back(std::move(b));
  }
  return p;
}

struct FreeDeleter {
  void operator()(void* q) const { std::free(q); }
};

// Writes block i from a 4096-aligned, zero-padded copy (the direct-I/O contract).
Status WriteBlockAligned(FileWriter* w, const Payload& p, uint32_t i) {
  const Layout::Block& b = p.layout.blocks[i];
  const size_t n = AlignUp(b.length);
  std::unique_ptr<uint8_t, FreeDeleter> buf(static_cast<uint8_t*>(std::aligned_alloc(4096, n)));
  std::memset(buf.get(), 0, n);
  const Layout::Region& r = p.layout.regions[b.region];
  std::memcpy(buf.get(), p.regions[b.region].data() + (b.offset - r.data_offset), b.length);
  return w->WriteBlock(i, buf.get(), crc32c::Value(buf.get(), b.length));
}

FileInfo Info(int64_t number = 3) {
  FileInfo info;
  info.kind = EntryKind::kCheckpoint;
  info.name = "run";
  info.number = number;
  info.created_unix_ns = 1700000000123456789;
  return info;
}

// Writes a complete file with blocks in a shuffled order.
Status WriteFile(os::FileSystem* fs, const std::string& path, const Payload& p, bool direct,
                 const FileInfo& info = Info()) {
  WriterOptions o;
  o.direct = direct;
  CAIRN_ASSIGN_OR_RETURN(auto w, FileWriter::Create(fs, path, info, p.layout, o));
  std::vector<uint32_t> order(p.layout.blocks.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(99));
  for (uint32_t i : order) CAIRN_RETURN_IF_ERROR(WriteBlockAligned(w.get(), p, i));
  return w->Commit();
}

void ExpectRoundTrip(os::FileSystem* fs, const std::string& path, const Payload& p) {
  auto r = FileReader::Open(fs, path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  FileReader& reader = **r;
  EXPECT_EQ(EntryKind::kCheckpoint, reader.info().kind);
  EXPECT_EQ("run", reader.info().name);
  EXPECT_EQ(3, reader.info().number);
  EXPECT_EQ(1700000000123456789, reader.info().created_unix_ns);
  EXPECT_EQ(FileBytes(p.layout, 3), reader.file_bytes());
  EXPECT_EQ(0u, reader.file_bytes() % 4096);
  const Layout& l = reader.layout();
  EXPECT_EQ(kBlock, l.block_bytes);
  EXPECT_EQ(p.layout.payload_bytes, l.payload_bytes);
  ASSERT_EQ(p.layout.regions.size(), l.regions.size());
  ASSERT_EQ(p.layout.blocks.size(), l.blocks.size());
  for (size_t i = 0; i < l.blocks.size(); ++i) {
    EXPECT_EQ(p.layout.blocks[i].offset, l.blocks[i].offset) << i;
    EXPECT_EQ(p.layout.blocks[i].length, l.blocks[i].length) << i;
    EXPECT_EQ(p.layout.blocks[i].region, l.blocks[i].region) << i;
  }
  for (uint32_t r2 = 0; r2 < l.regions.size(); ++r2) {
    const RegionSpec& want = p.layout.regions[r2].spec;
    EXPECT_EQ(want.id, l.regions[r2].spec.id);
    EXPECT_EQ(want.memory, l.regions[r2].spec.memory);
    EXPECT_EQ(static_cast<int>(r2), reader.FindRegion(want.id));
    Bytes got(want.bytes + 1, 0xEE);  // one guard byte that must stay untouched
    ASSERT_TRUE(reader.ReadRegion(r2, got.data()).ok());
    EXPECT_EQ(0xEE, got.back());
    got.pop_back();
    EXPECT_TRUE(got == p.regions[r2]) << "region id " << want.id;
  }
  EXPECT_EQ(-1, reader.FindRegion(12345));
  EXPECT_TRUE(reader.VerifyAll().ok());
}

// ---- Round trips --------------------------------------------------------------

class FormatRoundTrip : public ::testing::TestWithParam<bool> {};

TEST_P(FormatRoundTrip, OddRegionSizesBlocksOutOfOrder) {
  MemFs fs;
  Payload p = MakePayload(OddRegions(), 1);
  ASSERT_TRUE(WriteFile(&fs, kPath, p, GetParam()).ok());
  EXPECT_FALSE(fs.misaligned);
  EXPECT_EQ(1, fs.dir_syncs);
  ExpectRoundTrip(&fs, kPath, p);
}

INSTANTIATE_TEST_SUITE_P(DirectAndBuffered, FormatRoundTrip, ::testing::Bool());

TEST(FormatFile, EmptyFileRoundTrips) {
  MemFs fs;
  Payload p = MakePayload({}, 1);
  ASSERT_TRUE(WriteFile(&fs, kPath, p, true).ok());
  auto r = FileReader::Open(&fs, kPath);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(0u, (*r)->layout().regions.size());
  EXPECT_EQ(8192u, (*r)->file_bytes());
  EXPECT_TRUE((*r)->VerifyAll().ok());
}

TEST(FormatFile, DirectFallsBackToBufferedWhenRefused) {
  MemFs fs;
  fs.refuse_direct = true;
  Payload p = MakePayload(OddRegions(), 2);
  WriterOptions o;
  o.direct = true;
  auto w = FileWriter::Create(&fs, kPath, Info(), p.layout, o);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_FALSE((*w)->direct());
  for (uint32_t i = 0; i < p.layout.blocks.size(); ++i) ASSERT_TRUE(WriteBlockAligned(w->get(), p, i).ok());
  ASSERT_TRUE((*w)->Commit().ok());
  ExpectRoundTrip(&fs, kPath, p);
}

TEST(FormatFile, UnalignedSourceIsBouncedInDirectMode) {
  MemFs fs;
  Payload p = MakePayload({{1, MemoryKind::kHost, 3 * kBlock - 5}}, 3);
  WriterOptions o;
  o.direct = true;
  auto w = FileWriter::Create(&fs, kPath, Info(), p.layout, o);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->direct());
  Bytes src(p.regions[0].size() + 1);
  std::memcpy(src.data() + 1, p.regions[0].data(), p.regions[0].size());  // odd address
  for (uint32_t i = 0; i < p.layout.blocks.size(); ++i) {
    const uint8_t* d = src.data() + 1 + uint64_t{i} * kBlock;
    ASSERT_TRUE((*w)->WriteBlock(i, d, crc32c::Value(d, p.layout.blocks[i].length)).ok());
  }
  ASSERT_TRUE((*w)->Commit().ok());
  EXPECT_FALSE(fs.misaligned);
  ExpectRoundTrip(&fs, kPath, p);
}

TEST(FormatFile, RoundTripOnRealFileSystem) {
  // /var/tmp is usually a disk file system (O_DIRECT works); TempDir() may
  // be tmpfs, where the writer falls back to buffered I/O.
  std::string tmpl = (std::filesystem::is_directory("/var/tmp") ? std::string("/var/tmp/")
                                                                 : ::testing::TempDir()) +
                     "cairn_format_test.XXXXXX";
  ASSERT_NE(nullptr, mkdtemp(tmpl.data()));
  const std::string d = tmpl;
  os::FileSystem* fs = os::FileSystem::Default();
  Payload p = MakePayload(OddRegions(), 4);
  for (bool direct : {true, false}) {
    const std::string path = d + "/v00000000000000000003.cairn";
    ASSERT_TRUE(WriteFile(fs, path, p, direct).ok()) << direct;
    ExpectRoundTrip(fs, path, p);
    auto entries = fs->List(d);
    ASSERT_TRUE(entries.ok());
    ASSERT_EQ(1u, entries->size());  // no temp file left behind
    EXPECT_EQ("v00000000000000000003.cairn", (*entries)[0].name);
  }
  std::filesystem::remove_all(d);
}

// ---- Commit protocol ------------------------------------------------------------

TEST(FormatFile, FinalNameAppearsOnlyAtCommit) {
  MemFs fs;
  Payload p = MakePayload(OddRegions(), 5);
  auto w = FileWriter::Create(&fs, kPath, Info(), p.layout, WriterOptions{});
  ASSERT_TRUE(w.ok());
  const std::string temp = (*w)->temp_path();
  EXPECT_EQ(kDir + "/.v00000000000000000003.cairn." + std::to_string(getpid()) + ".tmp", temp);
  long pid = 0;
  EXPECT_TRUE(IsTempFileName(temp.substr(kDir.size() + 1), &pid));
  EXPECT_EQ(getpid(), pid);
  for (uint32_t i = 0; i < p.layout.blocks.size(); ++i) {
    EXPECT_EQ(0u, fs.files.count(kPath)) << "final name visible before commit";
    ASSERT_TRUE(WriteBlockAligned(w->get(), p, i).ok());
  }
  EXPECT_EQ(0u, fs.files.count(kPath));
  EXPECT_EQ(1u, fs.files.count(temp));
  ASSERT_TRUE((*w)->Commit().ok());
  EXPECT_EQ(1u, fs.files.count(kPath));
  EXPECT_EQ(0u, fs.files.count(temp));
  // Destroying a committed writer must not remove anything.
  w->reset();
  EXPECT_EQ(1u, fs.files.count(kPath));
}

TEST(FormatFile, AbortAndDestructionRemoveTheTemp) {
  MemFs fs;
  Payload p = MakePayload(OddRegions(), 6);
  {
    auto w = FileWriter::Create(&fs, kPath, Info(), p.layout, WriterOptions{});
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(WriteBlockAligned(w->get(), p, 0).ok());
    ASSERT_EQ(1u, fs.files.count((*w)->temp_path()));
    (*w)->Abort();
    EXPECT_TRUE(fs.files.empty());
    EXPECT_EQ(Code::kState, WriteBlockAligned(w->get(), p, 1).code());
    EXPECT_EQ(Code::kState, (*w)->Commit().code());
  }
  {
    auto w = FileWriter::Create(&fs, kPath, Info(), p.layout, WriterOptions{});
    ASSERT_TRUE(w.ok());
    EXPECT_EQ(1u, fs.files.size());
  }  // destroyed without Commit
  EXPECT_TRUE(fs.files.empty());
}

TEST(FormatFile, AbortedWriterDoesNotRemoveANewerTemp) {
  MemFs fs;
  Payload p = MakePayload(OddRegions(), 7);
  auto first = FileWriter::Create(&fs, kPath, Info(), p.layout, WriterOptions{});
  ASSERT_TRUE(first.ok());
  (*first)->Abort();
  auto second = FileWriter::Create(&fs, kPath, Info(), p.layout, WriterOptions{});
  ASSERT_TRUE(second.ok());
  first->reset();  // destructor of the aborted writer
  EXPECT_EQ(1u, fs.files.count((*second)->temp_path()));
}

TEST(FormatFile, WriterRejectsMisuse) {
  MemFs fs;
  Payload p = MakePayload(OddRegions(), 8);
  auto w = FileWriter::Create(&fs, kPath, Info(), p.layout, WriterOptions{});
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(WriteBlockAligned(w->get(), p, 0).ok());
  EXPECT_EQ(Code::kInvalidArgument, WriteBlockAligned(w->get(), p, 0).code());
  Bytes junk(kBlock);
  EXPECT_EQ(Code::kInvalidArgument,
            (*w)->WriteBlock(static_cast<uint32_t>(p.layout.blocks.size()), junk.data(), 0).code());
  Status s = (*w)->Commit();
  EXPECT_EQ(Code::kState, s.code());
  EXPECT_NE(std::string::npos, s.message().find("block 1 not written")) << s.message();
  EXPECT_EQ(0u, fs.files.count(kPath));

  FileInfo bad = Info();
  bad.name = "../etc";
  EXPECT_EQ(Code::kInvalidArgument,
            FileWriter::Create(&fs, kPath, bad, p.layout, WriterOptions{}).status().code());
  Layout odd = p.layout;
  odd.block_bytes = 1000;
  EXPECT_EQ(Code::kInvalidArgument,
            FileWriter::Create(&fs, kPath, Info(), odd, WriterOptions{}).status().code());
}

// ---- Damage ---------------------------------------------------------------------------

class FormatDamage : public ::testing::Test {
 protected:
  void SetUp() override {
    p_ = MakePayload(OddRegions(), 10);
    ASSERT_TRUE(WriteFile(&fs_, kPath, p_, true).ok());
    pristine_ = *fs_.files[kPath];
  }
  Bytes& file() { return *fs_.files[kPath]; }
  void Restore() { file() = pristine_; }
  Status OpenStatus() { return FileReader::Open(&fs_, kPath).status(); }
  uint64_t TableOffset() const { return p_.layout.data_end; }

  MemFs fs_;
  Payload p_;
  Bytes pristine_;
};

TEST_F(FormatDamage, BitFlipInDataNamesTheBlock) {
  // Blocks: id 1: none, id 2: 0, id 3: 1, id 4: 2-3, id 5: 4-7, id -7: 8.
  const uint32_t index = 4;
  const Layout::Block& b = p_.layout.blocks[index];
  ASSERT_EQ(5, p_.layout.regions[b.region].spec.id);
  file()[b.offset + 777] ^= 0x10;
  auto r = FileReader::Open(&fs_, kPath);
  ASSERT_TRUE(r.ok()) << "data is verified as it is read, not at open";
  Bytes buf(kBlock);
  Status s = (*r)->ReadBlock(index, buf.data());
  EXPECT_EQ(Code::kCorrupt, s.code());
  const std::string want = kPath + ": block 4 (region id 5, file offset " +
                           std::to_string(b.offset) + ", 16384 bytes): checksum mismatch";
  EXPECT_EQ(0u, s.message().rfind(want, 0)) << s.message();
  EXPECT_TRUE((*r)->ReadBlock(index, buf.data(), /*verify=*/false).ok());
  EXPECT_TRUE((*r)->ReadBlock(index - 1, buf.data()).ok());
  EXPECT_TRUE((*r)->ReadBlock(index + 1, buf.data()).ok());
  Status all = (*r)->VerifyAll();
  EXPECT_EQ(Code::kCorrupt, all.code());
  EXPECT_EQ(s.message(), all.message());
  Bytes region(p_.regions[b.region].size());
  EXPECT_EQ(Code::kCorrupt, (*r)->ReadRegion(b.region, region.data()).code());
}

TEST_F(FormatDamage, FlipsInPaddingAreHarmless) {
  // Padding after the 1-byte region (id 2) is not covered by any CRC.
  file()[p_.layout.regions[1].data_offset + 100] ^= 0xff;
  file()[1000] ^= 0xff;  // reserved header byte
  auto r = FileReader::Open(&fs_, kPath);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE((*r)->VerifyAll().ok());
}

TEST_F(FormatDamage, EveryFlipInHeaderTableAndFooterIsDetectedAtOpen) {
  std::vector<uint64_t> positions;
  for (uint64_t i = 0; i < 68; ++i) positions.push_back(i);  // header fields + CRC
  const uint64_t table_bytes = TableBytes(p_.layout, 3);
  for (uint64_t i = 0; i < table_bytes; ++i) positions.push_back(TableOffset() + i);
  for (uint64_t i = 0; i < 64; ++i) positions.push_back(file().size() - 64 + i);
  for (uint64_t pos : positions) {
    for (uint8_t bit : {0x01, 0x80}) {
      Restore();
      file()[pos] ^= bit;
      Status s = OpenStatus();
      ASSERT_FALSE(s.ok()) << "flip at " << pos << " not detected";
      ASSERT_TRUE(s.code() == Code::kCorrupt || s.code() == Code::kUnsupported) << s.ToString();
      ASSERT_EQ(0u, s.message().rfind(kPath + ": ", 0)) << s.message();
    }
  }
}

TEST_F(FormatDamage, MessagesSayWhatIsWrong) {
  file()[64] ^= 1;
  EXPECT_NE(std::string::npos, OpenStatus().message().find("header checksum mismatch"));
  Restore();
  file()[file().size() - 64 + 3] ^= 1;
  EXPECT_NE(std::string::npos, OpenStatus().message().find("footer checksum mismatch"));
  Restore();
  file()[TableOffset() + 9] ^= 1;
  EXPECT_NE(std::string::npos, OpenStatus().message().find("table checksum mismatch"));
  Restore();
  file()[0] = 'X';
  EXPECT_NE(std::string::npos, OpenStatus().message().find("bad header magic"));
}

TEST_F(FormatDamage, TruncationIsDetected) {
  const uint64_t full = file().size();
  for (uint64_t size : {full - 4096, full - 64, full - 1, uint64_t{4096}}) {
    Restore();
    file().resize(size);
    Status s = OpenStatus();
    EXPECT_EQ(Code::kCorrupt, s.code());
    EXPECT_EQ(kPath + ": file truncated: " + std::to_string(size) + " bytes, header says " +
                  std::to_string(full),
              s.message());
  }
  Restore();
  file().resize(100);
  EXPECT_NE(std::string::npos, OpenStatus().message().find("too small for the 4096-byte header"));
  Restore();
  file().resize(0);
  EXPECT_EQ(Code::kCorrupt, OpenStatus().code());
  Restore();
  file().resize(full + 4096);
  EXPECT_EQ(Code::kCorrupt, OpenStatus().code());
}

TEST_F(FormatDamage, UnknownFormatVersionIsRejected) {
  // A consistent file from a future writer: version 3 with valid CRCs.
  file()[8] = 3;
  const uint32_t hcrc = crc32c::Value(file().data(), 64);
  std::memcpy(file().data() + 64, &hcrc, 4);  // little-endian host assumed
  Status s = OpenStatus();
  EXPECT_EQ(Code::kUnsupported, s.code());
  EXPECT_EQ(kPath + ": format version 3 in header is not supported (this build reads versions 1 "
                    "and 2)",
            s.message());

  Restore();
  uint8_t* footer = file().data() + file().size() - 64;
  footer[36] = 7;
  const uint32_t fcrc = crc32c::Value(footer, 52);
  std::memcpy(footer + 52, &fcrc, 4);
  s = OpenStatus();
  EXPECT_EQ(Code::kUnsupported, s.code());
  EXPECT_NE(std::string::npos, s.message().find("format version 7 in footer")) << s.message();
}

// Rewrites the tables (same size) with valid CRCs after `mutate`, so that the
// structural checks, not the checksum, must catch the inconsistency.
class FormatBadTables : public FormatDamage {
 protected:
  template <typename F>
  Status OpenWith(F mutate) {
    Restore();
    Layout l = p_.layout;
    std::vector<uint32_t> crcs(l.blocks.size(), 0);
    std::string name = "run";
    mutate(l, name);
    const uint64_t n = TableBytes(l, name.size());
    EXPECT_EQ(TableBytes(p_.layout, 3), n);
    Bytes table(n);
    EncodeTables(l, crcs, name, table.data());
    std::memcpy(file().data() + TableOffset(), table.data(), n);
    Footer f;
    EXPECT_TRUE(DecodeFooter(file().data() + file().size() - 64, &f).ok());
    f.table_crc = crc32c::Value(table.data(), n);
    EncodeFooter(f, file().data() + file().size() - 64);
    return OpenStatus();
  }
};

TEST_F(FormatBadTables, ControlPassesUnmutated) {
  EXPECT_TRUE(OpenWith([](Layout&, std::string&) {}).ok());
}

TEST_F(FormatBadTables, StructuralErrorsAreDetected) {
  struct Case {
    const char* what;
    void (*mutate)(Layout&, std::string&);
  };
  const Case cases[] = {
      {"length", [](Layout& l, std::string&) { l.blocks[2].length -= 1; }},
      {"length", [](Layout& l, std::string&) { l.blocks[3].length += 1; }},
      {"appears twice", [](Layout& l, std::string&) { l.regions[2].spec.id = 2; }},
      {"data offset", [](Layout& l, std::string&) { l.regions[2].data_offset += 512; }},
      {"data offset", [](Layout& l, std::string&) { l.regions[2].data_offset = 0; }},
      {"data offset", [](Layout& l, std::string&) { l.regions[5].data_offset += 1 << 20; }},
      {"data offset", [](Layout& l, std::string&) { l.regions[3].data_offset -= 4096; }},
      {"first block", [](Layout& l, std::string&) { l.regions[3].first_block += 1; }},
      {"blocks, expected", [](Layout& l, std::string&) { l.regions[4].block_count -= 1; }},
      {"memory kind", [](Layout& l, std::string&) { l.regions[0].spec.memory = MemoryKind{9}; }},
      {"header says",
       [](Layout& l, std::string&) {
         l.regions[1].spec.bytes = 2;
         l.blocks[0].length = 2;
       }},
      {"bad name", [](Layout&, std::string& n) { n = ".ru"; }},
  };
  for (const Case& c : cases) {
    Status s = OpenWith(c.mutate);
    EXPECT_EQ(Code::kCorrupt, s.code()) << c.what;
    EXPECT_NE(std::string::npos, s.message().find(c.what)) << s.message();
  }
}

}  // namespace
}  // namespace cairn::format
