// Writes one data file crash-consistently: the data goes to a temporary file
// next to the final path; Commit() writes the tables and footer, fsyncs the
// file, renames it over the final path and fsyncs the directory. Until
// Commit() returns OK the final path is untouched (a reader sees the previous
// file or none). Abort() (or destruction without Commit) removes the temp file.
// If the directory sync after the rename fails, Commit() removes the final file
// again (the version is withdrawn) and returns the error.
#pragma once

#include <memory>
#include <string>

#include "format/layout.hpp"
#include "os/fs/fs.hpp"

namespace cairn::format {

struct WriterOptions {
  bool direct = false;   // try O_DIRECT; silently buffered if unsupported
  bool fsync = true;     // fsync file and directory on commit
  uint32_t mode = 0600;
};

class FileWriter {
 public:
  // Creates "<dir>/.<basename>.<pid>.tmp" and writes the header. The layout
  // says the format: Layout::Make gives version 1, Layout::MakeV2 version 2
  // (full or layered; its extents and version record are checked here, and a
  // content_id of 0 is replaced by a random one, see content_id()). Blocks
  // are those of the packed streams (docs/format.md 4.2).
  static Result<std::unique_ptr<FileWriter>> Create(os::FileSystem* fs, const std::string& final_path,
                                                    const FileInfo& info, const Layout& layout,
                                                    const WriterOptions& options);
  ~FileWriter();  // Abort() unless committed

  // Writes block `index` (layout.blocks[index].length payload bytes from data)
  // with its CRC32C `crc` (computed by the caller over the payload).
  // Blocks may be written in any order, each exactly once.
  // Precondition when direct(): data is 4096-aligned and readable for
  // AlignUp(length) bytes, the bytes past length being zero.
  Status WriteBlock(uint32_t index, const void* data, uint32_t crc);

  // Precondition: every block written. Writes tables + footer, syncs, renames.
  Status Commit();
  void Abort();

  bool direct() const;
  const Layout& layout() const { return layout_; }
  // As written in the header (created_unix_ns stamped when it was 0).
  const FileInfo& info() const { return info_; }
  // Version 2: the id a later layer names as its base_content_id.
  uint64_t content_id() const { return layout_.record.content_id; }
  const std::string& temp_path() const { return temp_path_; }
  const std::string& final_path() const { return final_path_; }

 private:
  FileWriter() = default;
  os::FileSystem* fs_ = nullptr;
  std::unique_ptr<os::File> file_;
  std::string final_path_, temp_path_;
  FileInfo info_;
  Layout layout_;
  WriterOptions options_;
  std::vector<uint32_t> crcs_;
  std::vector<bool> written_;
  bool committed_ = false;
};

}  // namespace cairn::format
