// FileReader: opens a data file, checks its header, footer and tables, and
// reads blocks verifying their CRC32C (docs/format.md 2.5, 2.6).
//
// The header is read first because it records the file size: a truncated
// file has lost its footer, and the header is what lets the error say how
// much is missing. Every kCorrupt message starts with the file's path.
#include "format/file_reader.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>

#include "format/codec.hpp"
#include "format/le.hpp"
#include "util/crc32c.hpp"

namespace cairn::format {
namespace {

std::string Hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

}  // namespace

Result<std::unique_ptr<FileReader>> FileReader::Open(os::FileSystem* fs, const std::string& path) {
  if (fs == nullptr) return Status::InvalidArgument("FileReader: no file system");
  std::unique_ptr<FileReader> r(new FileReader());
  r->path_ = path;
  CAIRN_ASSIGN_OR_RETURN(r->file_, fs->Open(path, os::OpenOptions{}));
  CAIRN_ASSIGN_OR_RETURN(const uint64_t size, r->file_->Size());
  r->file_bytes_ = size;
  auto corrupt = [&path](const std::string& what) { return Status::Corrupt(path + ": " + what); };

  if (size < kHeaderBytes) {
    return corrupt("file truncated: " + std::to_string(size) +
                   " bytes, too small for the 4096-byte header");
  }
  std::vector<uint8_t> header_buf(kHeaderBytes);
  CAIRN_RETURN_IF_ERROR(r->file_->ReadAt(header_buf.data(), kHeaderBytes, 0));
  Header h;
  CAIRN_RETURN_IF_ERROR(DecodeHeader(header_buf.data(), &h).WithContext(path));
  if (size < h.file_bytes) {
    return corrupt("file truncated: " + std::to_string(size) + " bytes, header says " +
                   std::to_string(h.file_bytes));
  }
  if (size > h.file_bytes) {
    return corrupt("file is " + std::to_string(size) + " bytes, header says " +
                   std::to_string(h.file_bytes));
  }

  uint8_t footer_buf[kFooterBytes];
  CAIRN_RETURN_IF_ERROR(r->file_->ReadAt(footer_buf, kFooterBytes, size - kFooterBytes));
  Footer f;
  CAIRN_RETURN_IF_ERROR(DecodeFooter(footer_buf, &f).WithContext(path));
  CAIRN_RETURN_IF_ERROR(CheckFooter(f, h).WithContext(path));

  // CheckFooter bounded table_bytes by the file size, so this allocation is
  // no larger than the file. Version 2 reads the padding up to the footer
  // too (one read either way) to check that it is zero.
  const uint64_t area = h.format_version == kFormatVersion2
                            ? size - kFooterBytes - f.table_offset
                            : f.table_bytes;
  std::vector<uint8_t> table(area);
  CAIRN_RETURN_IF_ERROR(r->file_->ReadAt(table.data(), table.size(), f.table_offset));
  CAIRN_RETURN_IF_ERROR(
      DecodeTables(table.data(), h, f, &r->layout_, &r->crcs_, &r->info_.name).WithContext(path));
  for (uint64_t i = f.table_bytes; i < area; ++i) {
    if (table[i] != 0) {
      return corrupt("padding byte at file offset " + std::to_string(f.table_offset + i) +
                     " after the table is not zero");
    }
  }
  r->footer_crc_ = le::Get32(footer_buf + kFooterBytes - 12);
  r->info_.kind = h.kind;
  r->info_.number = h.number;
  r->info_.created_unix_ns = h.created_unix_ns;
  return r;
}

Status FileReader::ReadBlock(uint32_t index, void* dst, bool verify) {
  if (index >= layout_.blocks.size()) {
    return Status::InvalidArgument(path_ + ": block " + std::to_string(index) +
                                   " out of range (" + std::to_string(layout_.blocks.size()) +
                                   " blocks)");
  }
  const Layout::Block& b = layout_.blocks[index];
  CAIRN_RETURN_IF_ERROR(file_->ReadAt(dst, b.length, b.offset));
  if (!verify) return Status::Ok();
  return CheckBlockCrc(index, crc32c::Value(dst, b.length));
}

Status FileReader::CheckBlockCrc(uint32_t index, uint32_t computed) const {
  if (computed == crcs_[index]) return Status::Ok();
  const Layout::Block& b = layout_.blocks[index];
  return Status::Corrupt(path_ + ": block " + std::to_string(index) + " (region id " +
                         std::to_string(layout_.regions[b.region].spec.id) + ", file offset " +
                         std::to_string(b.offset) + ", " + std::to_string(b.length) +
                         " bytes): checksum mismatch (stored " + Hex32(crcs_[index]) +
                         ", computed " + Hex32(computed) + ")");
}

Status FileReader::ReadRegion(uint32_t r, void* dst) {
  if (r >= layout_.regions.size()) {
    return Status::InvalidArgument(path_ + ": region index " + std::to_string(r) +
                                   " out of range (" + std::to_string(layout_.regions.size()) +
                                   " regions)");
  }
  const Layout::Region& reg = layout_.regions[r];
  if (reg.stored_bytes != reg.spec.bytes) {
    return Status::InvalidArgument(path_ + ": region id " + std::to_string(reg.spec.id) +
                                   " is layered (stores " + std::to_string(reg.stored_bytes) +
                                   " of " + std::to_string(reg.spec.bytes) +
                                   " bytes): restore it through format::Chain");
  }
  uint8_t* out = static_cast<uint8_t*>(dst);
  for (uint32_t j = 0; j < reg.block_count; ++j) {
    CAIRN_RETURN_IF_ERROR(ReadBlock(reg.first_block + j, out + uint64_t{j} * layout_.block_bytes));
  }
  return Status::Ok();
}

int FileReader::FindRegion(int32_t id) const {
  for (size_t i = 0; i < layout_.regions.size(); ++i) {
    if (layout_.regions[i].spec.id == id) return static_cast<int>(i);
  }
  return -1;
}

Status FileReader::VerifyAll() {
  uint32_t largest = 0;
  for (const Layout::Block& b : layout_.blocks) largest = std::max(largest, b.length);
  if (largest == 0) return Status::Ok();
  std::unique_ptr<uint8_t[]> buf(new (std::nothrow) uint8_t[largest]);
  if (!buf) {
    return Status::NoMemory(path_ + ": cannot allocate a " + std::to_string(largest) +
                            "-byte verify buffer");
  }
  for (uint32_t i = 0; i < layout_.blocks.size(); ++i) {
    CAIRN_RETURN_IF_ERROR(ReadBlock(i, buf.get(), true));
  }
  return layout_.format_version == kFormatVersion2 ? CheckDataPadding() : Status::Ok();
}

// Version 2: the bytes after each region's last block up to the next 4096
// boundary are zero (docs/format.md 4.6 item 7).
Status FileReader::CheckDataPadding() {
  uint8_t pad[kAlignment];
  for (const Layout::Region& reg : layout_.regions) {
    const uint64_t end = reg.data_offset + reg.stored_bytes;
    const uint64_t n = AlignUp(end) - end;
    if (n == 0) continue;
    CAIRN_RETURN_IF_ERROR(file_->ReadAt(pad, n, end));
    for (uint64_t i = 0; i < n; ++i) {
      if (pad[i] != 0) {
        return Status::Corrupt(path_ + ": padding byte at file offset " + std::to_string(end + i) +
                               " after region id " + std::to_string(reg.spec.id) +
                               " is not zero");
      }
    }
  }
  return Status::Ok();
}

}  // namespace cairn::format
