// Opens and verifies a Cairn data file. Open() checks the footer, the header
// and the tables (magic, version, CRCs, offsets inside the file, block sizes
// adding up); block data is verified as it is read. Every kCorrupt message
// names the file and, for data, the block index, the region id and the offset.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "format/layout.hpp"
#include "os/fs/fs.hpp"

namespace cairn::format {

class FileReader {
 public:
  static Result<std::unique_ptr<FileReader>> Open(os::FileSystem* fs, const std::string& path);

  const FileInfo& info() const { return info_; }
  const Layout& layout() const { return layout_; }
  uint32_t block_crc(uint32_t index) const { return crcs_[index]; }
  const std::string& path() const { return path_; }
  uint64_t file_bytes() const { return file_bytes_; }
  uint32_t format_version() const { return layout_.format_version; }
  // Version 2's version record (a full version with content_id 0 for version 1).
  const VersionRecord& record() const { return layout_.record; }
  // The footer's CRC: identifies this file's bytes (it covers table_crc, which
  // covers every block CRC).
  uint32_t footer_crc() const { return footer_crc_; }

  // Reads block `index` (layout().blocks[index].length bytes) into dst and
  // verifies its CRC32C when `verify`.
  Status ReadBlock(uint32_t index, void* dst, bool verify = true);
  // kCorrupt naming the file, block, region id and offset when `computed`
  // (the CRC32C of the block's payload as read) differs from the table's.
  Status CheckBlockCrc(uint32_t index, uint32_t computed) const;
  // Reads all of region r into dst (layout().regions[r].spec.bytes bytes).
  // InvalidArgument for a region that a layered version stores only in part.
  Status ReadRegion(uint32_t r, void* dst);
  // Index of the region with this id, or -1.
  int FindRegion(int32_t id) const;
  // Reads and verifies every block with a bounded buffer, and in version 2
  // the zero padding after each region; returns the first damage found.
  Status VerifyAll();

 private:
  FileReader() = default;
  Status CheckDataPadding();
  std::unique_ptr<os::File> file_;
  std::string path_;
  uint64_t file_bytes_ = 0;
  FileInfo info_;
  Layout layout_;
  std::vector<uint32_t> crcs_;
  uint32_t footer_crc_ = 0;
};

}  // namespace cairn::format
