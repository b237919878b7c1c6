// Layout::Make and the byte-level encoding, checked against the offsets that
// docs/format.md states (so a change to either shows up here).
#include "format/codec.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "util/crc32c.hpp"

namespace cairn::format {
namespace {

uint32_t Le32(const uint8_t* p) { return p[0] | p[1] << 8 | p[2] << 16 | uint32_t{p[3]} << 24; }
uint64_t Le64(const uint8_t* p) { return Le32(p) | uint64_t{Le32(p + 4)} << 32; }

TEST(FormatLayout, RegionsStartAlignedAndBlocksAreCut) {
  const uint32_t bb = 8192;
  Layout l = Layout::Make({{10, MemoryKind::kHost, 0},
                           {11, MemoryKind::kHost, 1},
                           {12, MemoryKind::kHost, 8192},
                           {13, MemoryKind::kHost, 8193},
                           {14, MemoryKind::kHost, 0}},
                          bb);
  ASSERT_EQ(5u, l.regions.size());
  EXPECT_EQ(4096u, l.regions[0].data_offset);  // empty: no space
  EXPECT_EQ(0u, l.regions[0].block_count);
  EXPECT_EQ(4096u, l.regions[1].data_offset);
  EXPECT_EQ(8192u, l.regions[2].data_offset);   // 1 byte rounds up to 4096
  EXPECT_EQ(16384u, l.regions[3].data_offset);  // 8192 bytes
  EXPECT_EQ(2u, l.regions[3].block_count);
  EXPECT_EQ(2u, l.regions[3].first_block);
  EXPECT_EQ(16384u + 12288u, l.regions[4].data_offset);
  EXPECT_EQ(16384u + 12288u, l.data_end);
  EXPECT_EQ(1u + 8192 + 8193, l.payload_bytes);
  ASSERT_EQ(4u, l.blocks.size());
  EXPECT_EQ(1u, l.blocks[0].length);
  EXPECT_EQ(8192u, l.blocks[1].length);
  EXPECT_EQ(8192u, l.blocks[2].length);
  EXPECT_EQ(16384u, l.blocks[2].offset);
  EXPECT_EQ(1u, l.blocks[3].length);
  EXPECT_EQ(16384u + 8192u, l.blocks[3].offset);
  EXPECT_EQ(3u, l.blocks[3].region);

  EXPECT_EQ(4096u, Layout::Make({}, bb).data_end);
  // Tables: 5 regions * 32 + 4 blocks * 8 + name; plus the 64-byte footer.
  EXPECT_EQ(5u * 32 + 4 * 8 + 3, TableBytes(l, 3));
  EXPECT_EQ(l.data_end + 4096, FileBytes(l, 3));
}

TEST(FormatCodec, HeaderBytesMatchTheSpec) {
  Header h;
  h.kind = EntryKind::kHistoryStep;
  h.block_bytes = 4 << 20;
  h.number = 0x0102030405060708;
  h.created_unix_ns = 1700000000000000001;
  h.region_count = 3;
  h.block_count = 9;
  h.payload_bytes = 0x1122334455;
  h.file_bytes = 0x2000000;
  std::vector<uint8_t> b(kHeaderBytes, 0xAB);
  EncodeHeader(h, b.data());
  EXPECT_EQ(0, std::memcmp(b.data(), "CAIRNDAT", 8));
  EXPECT_EQ(1u, Le32(&b[8]));
  EXPECT_EQ(4096u, Le32(&b[12]));
  EXPECT_EQ(2u, Le32(&b[16]));
  EXPECT_EQ(4u << 20, Le32(&b[20]));
  EXPECT_EQ(0x0102030405060708u, Le64(&b[24]));
  EXPECT_EQ(1700000000000000001u, Le64(&b[32]));
  EXPECT_EQ(3u, Le32(&b[40]));
  EXPECT_EQ(9u, Le32(&b[44]));
  EXPECT_EQ(0x1122334455u, Le64(&b[48]));
  EXPECT_EQ(0x2000000u, Le64(&b[56]));
  EXPECT_EQ(crc32c::Value(b.data(), 64), Le32(&b[64]));
  for (size_t i = 68; i < kHeaderBytes; ++i) ASSERT_EQ(0, b[i]) << i;

  Header d;
  ASSERT_TRUE(DecodeHeader(b.data(), &d).ok());
  EXPECT_EQ(h.kind, d.kind);
  EXPECT_EQ(h.block_bytes, d.block_bytes);
  EXPECT_EQ(h.number, d.number);
  EXPECT_EQ(h.created_unix_ns, d.created_unix_ns);
  EXPECT_EQ(h.region_count, d.region_count);
  EXPECT_EQ(h.block_count, d.block_count);
  EXPECT_EQ(h.payload_bytes, d.payload_bytes);
  EXPECT_EQ(h.file_bytes, d.file_bytes);
}

TEST(FormatCodec, HeaderFieldChecks) {
  Header h;
  h.block_bytes = 1000;  // not a multiple of 4096
  std::vector<uint8_t> b(kHeaderBytes);
  EncodeHeader(h, b.data());
  Status s = DecodeHeader(b.data(), &h);
  EXPECT_EQ(Code::kCorrupt, s.code());
  EXPECT_NE(std::string::npos, s.message().find("block_bytes 1000")) << s.message();

  h.block_bytes = 4096;
  h.number = -1;
  EncodeHeader(h, b.data());
  EXPECT_EQ(Code::kCorrupt, DecodeHeader(b.data(), &h).code());
}

TEST(FormatCodec, FooterBytesMatchTheSpec) {
  Footer f;
  f.table_offset = 0x10000;
  f.table_bytes = 300;
  f.table_crc = 0xDEADBEEF;
  f.name_len = 12;
  f.number = 42;
  f.kind = EntryKind::kCheckpoint;
  f.file_bytes = 0x11000;
  uint8_t b[64];
  std::memset(b, 0xAB, sizeof b);
  EncodeFooter(f, b);
  EXPECT_EQ(0x10000u, Le64(&b[0]));
  EXPECT_EQ(300u, Le64(&b[8]));
  EXPECT_EQ(0xDEADBEEFu, Le32(&b[16]));
  EXPECT_EQ(12u, Le32(&b[20]));
  EXPECT_EQ(42u, Le64(&b[24]));
  EXPECT_EQ(1u, Le32(&b[32]));
  EXPECT_EQ(1u, Le32(&b[36]));
  EXPECT_EQ(0x11000u, Le64(&b[40]));
  EXPECT_EQ(0u, Le32(&b[48]));
  EXPECT_EQ(crc32c::Value(b, 52), Le32(&b[52]));
  EXPECT_EQ(0, std::memcmp(&b[56], "CAIRNEND", 8));
  Footer d;
  ASSERT_TRUE(DecodeFooter(b, &d).ok());
  EXPECT_EQ(f.table_offset, d.table_offset);
  EXPECT_EQ(f.table_crc, d.table_crc);
  EXPECT_EQ(f.file_bytes, d.file_bytes);
}

TEST(FormatCodec, TableEntriesMatchTheSpec) {
  Layout l = Layout::Make({{-2, MemoryKind::kDevice, 4097}}, 4096);
  std::vector<uint32_t> crcs = {0x11111111, 0x22222222};
  std::vector<uint8_t> b(TableBytes(l, 4));
  EncodeTables(l, crcs, "name", b.data());
  ASSERT_EQ(32u + 16 + 4, b.size());
  EXPECT_EQ(0xFFFFFFFEu, Le32(&b[0]));  // id -2
  EXPECT_EQ(1u, Le32(&b[4]));           // device
  EXPECT_EQ(4097u, Le64(&b[8]));
  EXPECT_EQ(4096u, Le64(&b[16]));
  EXPECT_EQ(0u, Le32(&b[24]));
  EXPECT_EQ(2u, Le32(&b[28]));
  EXPECT_EQ(0x11111111u, Le32(&b[32]));
  EXPECT_EQ(4096u, Le32(&b[36]));
  EXPECT_EQ(0x22222222u, Le32(&b[40]));
  EXPECT_EQ(1u, Le32(&b[44]));
  EXPECT_EQ(0, std::memcmp(&b[48], "name", 4));

  // And back, through the same checks a reader applies.
  FileInfo info;
  info.name = "name";
  Header h = MakeHeader(info, l);
  Footer f;
  f.table_offset = l.data_end;
  f.table_bytes = b.size();
  f.table_crc = crc32c::Value(b.data(), b.size());
  f.name_len = 4;
  f.file_bytes = h.file_bytes;
  ASSERT_TRUE(CheckFooter(f, h).ok()) << CheckFooter(f, h).ToString();
  Layout d;
  std::vector<uint32_t> dcrcs;
  std::string name;
  ASSERT_TRUE(DecodeTables(b.data(), h, f, &d, &dcrcs, &name).ok());
  EXPECT_EQ("name", name);
  EXPECT_EQ(crcs, dcrcs);
  ASSERT_EQ(1u, d.regions.size());
  EXPECT_EQ(-2, d.regions[0].spec.id);
  EXPECT_EQ(MemoryKind::kDevice, d.regions[0].spec.memory);
  EXPECT_EQ(8192u, d.blocks[1].offset);

  f.number = 5;  // header says 0
  EXPECT_EQ(Code::kCorrupt, CheckFooter(f, h).code());
}

}  // namespace
}  // namespace cairn::format
