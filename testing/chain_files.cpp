#include "testing/chain_files.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "format/naming.hpp"
#include "testing/test_util.hpp"
#include "util/crc32c.hpp"

namespace cairn::test {

namespace {

// A failure of a write: the test's (error null) or the caller's to judge.
bool Failed(const Status& s, Status* error) {
  if (s.ok()) return false;
  if (error == nullptr) {
    ADD_FAILURE() << s.ToString();
  } else if (error->ok()) {
    *error = s;
  }
  return true;
}

}  // namespace

uint64_t ChainFiles::Write(int64_t number, const std::vector<uint8_t>& content,
                           const ExtentList& extents, const format::VersionRecord& record) const {
  const std::vector<format::RegionSpec> specs{
      {.id = region_id, .memory = MemoryKind::kHost, .bytes = bytes}};
  const format::Layout l = format::Layout::MakeV2(specs, {extents}, block_bytes, record);
  std::vector<uint8_t> packed;
  for (const Extent& e : extents) {
    packed.insert(packed.end(), content.begin() + static_cast<ptrdiff_t>(e.offset),
                  content.begin() + static_cast<ptrdiff_t>(e.end()));
  }
  if (Failed(fs->CreateDirs(os::JoinPath(dir, name), 0700), error)) return 0;
  auto w = format::FileWriter::Create(
      fs, format::EntryPath(dir, name, format::EntryKind::kCheckpoint, number),
      {.kind = format::EntryKind::kCheckpoint, .name = name, .number = number}, l, options);
  if (Failed(w.status(), error)) return 0;
  // 4096-aligned and zero-padded: the writer may use O_DIRECT.
  const size_t cap = format::AlignUp(block_bytes);
  std::unique_ptr<uint8_t, decltype(&std::free)> buf(
      static_cast<uint8_t*>(std::aligned_alloc(format::kAlignment, cap)), &std::free);
  const auto& region = l.regions.empty() ? format::Layout::Region{} : l.regions[0];
  for (uint32_t j = 0; j < region.block_count; ++j) {
    const uint32_t index = region.first_block + j;
    const uint32_t n = l.blocks[index].length;
    std::memset(buf.get(), 0, cap);
    std::memcpy(buf.get(), packed.data() + uint64_t{j} * block_bytes, n);
    if (Failed((*w)->WriteBlock(index, buf.get(), crc32c::Value(buf.get(), n)), error)) return 0;
  }
  const uint64_t id = (*w)->content_id();
  return Failed((*w)->Commit(), error) ? 0 : id;
}

ChainFiles::Written ChainFiles::WriteFull(int64_t number) const {
  Written out;
  out.content = SplitMixPattern(bytes, static_cast<uint64_t>(number), 0);
  out.content_id = Write(number, out.content, {{0, bytes}}, {});
  return out;
}

ChainFiles::Written ChainFiles::WriteLayer(int64_t number, int64_t base_number,
                                           const Written& base) const {
  Written out;
  out.content = base.content;
  out.depth = base.depth + 1;
  // Two changed runs that move with the number: one block-aligned page and
  // one unaligned run that crosses a block boundary, so restores scatter.
  ExtentList changed;
  const uint64_t page = (static_cast<uint64_t>(number) * 3 % (bytes / 4096)) * 4096;
  const uint64_t odd = std::min<uint64_t>(bytes - 1, page + 4096 + 1000);
  AppendExtent(changed, page, std::min<uint64_t>(4096, bytes - page));
  if (odd > page + 4096) AppendExtent(changed, odd, std::min<uint64_t>(5000, bytes - odd));
  const auto fresh = SplitMixPattern(bytes, static_cast<uint64_t>(number) + 1000, 1);
  for (const Extent& e : changed) {
    std::memcpy(out.content.data() + e.offset, fresh.data() + e.offset, e.bytes);
  }
  format::VersionRecord rec{.content_id = 0, .base_version = base_number,
                            .base_content_id = base.content_id, .depth = out.depth};
  out.content_id = Write(number, out.content, changed, rec);
  return out;
}

std::vector<ChainFiles::Written> ChainFiles::WriteChain(int64_t first, int layers) const {
  std::vector<Written> out{WriteFull(first)};
  for (int i = 1; i <= layers; ++i) out.push_back(WriteLayer(first + i, first + i - 1, out.back()));
  return out;
}

}  // namespace cairn::test
