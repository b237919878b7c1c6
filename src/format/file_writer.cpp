// FileWriter: temp file, blocks, tables + footer, fsync, rename, fsync dir
// (docs/format.md 3.3).
//
// With direct I/O every write must be 4096-aligned in buffer address, size and
// offset. The header and the table area are written from aligned, zero-padded
// buffers of their own; blocks come from the caller (aligned by contract), or
// through a bounce buffer when a caller hands an unaligned pointer.
//
// A writer is finished (committed or aborted) when fs_ is null; nothing but
// the accessors may be used then. Clearing fs_ is also what keeps a second
// Abort() (e.g. from the destructor) from removing a temp file that a newer
// writer of the same process has since created under the same name.
#include "format/file_writer.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>

#include "format/codec.hpp"
#include "format/naming.hpp"
#include "os/fs/fs.hpp"
#include "os/mem/memory.hpp"
#include "util/crc32c.hpp"

namespace cairn::format {
namespace {

using AlignedBuffer = os::DirectBuffer;
static_assert(kAlignment == os::kDirectIoAlignment);

// A zero-filled buffer of `bytes` (a multiple of kAlignment) aligned for
// direct I/O; null when out of memory.
AlignedBuffer AllocAligned(size_t bytes) { return os::AllocDirectBuffer(bytes); }

// "/a/b/v1.cairn" -> "/a/b"; "v1.cairn" -> "."; "/v1.cairn" -> "/".
std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// A version-2 layout is what docs/format.md 4.3 allows.
Status CheckV2Layout(const Layout& l, int64_t number) {
  const VersionRecord& rec = l.record;
  if (rec.layered() && (rec.base_version >= number || rec.depth == 0 || rec.base_content_id == 0)) {
    return Status::InvalidArgument(
        "FileWriter: layered version " + std::to_string(number) + " needs a base version below it, "
        "a base content id and depth >= 1 (got base " + std::to_string(rec.base_version) +
        ", depth " + std::to_string(rec.depth) + ")");
  }
  if (!rec.layered() && (rec.base_version != -1 || rec.depth != 0 || rec.base_content_id != 0)) {
    return Status::InvalidArgument("FileWriter: a full version has base -1, depth 0, base id 0");
  }
  for (uint32_t r = 0; r < l.regions.size(); ++r) {
    const Layout::Region& reg = l.regions[r];
    const ExtentList list(l.region_extents(r), l.region_extents(r) + reg.extent_count);
    std::string what = ValidateExtents(list, reg.spec.bytes);
    if (what.empty() && !rec.layered() && reg.stored_bytes != reg.spec.bytes) {
      what = "a full version must store the whole region";
    }
    if (!what.empty()) {
      return Status::InvalidArgument("FileWriter: region id " + std::to_string(reg.spec.id) +
                                     ": " + what);
    }
  }
  return Status::Ok();
}

std::string TempPathFor(const std::string& final_path) {
  const size_t slash = final_path.rfind('/');
  const std::string prefix = slash == std::string::npos ? "" : final_path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? final_path : final_path.substr(slash + 1);
  return prefix + "." + base + "." + std::to_string(static_cast<long>(getpid())) + ".tmp";
}

}  // namespace

uint64_t DrawContentId() {
  std::random_device rd;
  uint64_t id = 0;
  while (id == 0) id = (uint64_t{rd()} << 32) ^ rd();
  return id;
}

Result<std::unique_ptr<FileWriter>> FileWriter::Create(os::FileSystem* fs,
                                                       const std::string& final_path,
                                                       const FileInfo& info, const Layout& layout,
                                                       const WriterOptions& options) {
  if (fs == nullptr) return Status::InvalidArgument("FileWriter: no file system");
  CAIRN_RETURN_IF_ERROR(ValidateName(info.name));
  if (info.number < 0) {
    return Status::InvalidArgument("FileWriter: negative number " + std::to_string(info.number));
  }
  if (layout.block_bytes == 0 || layout.block_bytes % kAlignment != 0) {
    return Status::InvalidArgument("FileWriter: block_bytes " + std::to_string(layout.block_bytes) +
                                   " is not a positive multiple of 4096");
  }
  if (layout.format_version == kFormatVersion2) {
    CAIRN_RETURN_IF_ERROR(CheckV2Layout(layout, info.number));
  }
  const size_t slash = final_path.rfind('/');
  if (final_path.empty() || slash + 1 == final_path.size()) {
    return Status::InvalidArgument("FileWriter: bad path '" + final_path + "'");
  }

  std::unique_ptr<FileWriter> w(new FileWriter());
  w->fs_ = fs;
  w->final_path_ = final_path;
  w->temp_path_ = TempPathFor(final_path);
  w->info_ = info;
  if (w->info_.created_unix_ns == 0) {
    w->info_.created_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count();
  }
  w->layout_ = layout;
  if (layout.format_version == kFormatVersion2 && layout.record.content_id == 0) {
    w->layout_.record.content_id = DrawContentId();
  }
  w->options_ = options;
  w->crcs_.assign(layout.blocks.size(), 0);
  w->written_.assign(layout.blocks.size(), false);

  auto file = os::OpenPreferringDirect(
      fs, w->temp_path_,
      os::OpenOptions{.write = true, .direct = options.direct, .mode = options.mode});
  if (!file.ok()) {
    w->fs_ = nullptr;  // nothing was created
    return file.status();
  }
  w->file_ = std::move(file).value();

  AlignedBuffer header = AllocAligned(kHeaderBytes);
  if (!header) {
    w->Abort();
    return Status::NoMemory("FileWriter: cannot allocate the header buffer");
  }
  EncodeHeader(MakeHeader(w->info_, layout), header.get());
  if (Status s = w->file_->WriteAt(header.get(), kHeaderBytes, 0); !s.ok()) {
    w->Abort();
    return s;
  }
  return w;
}

FileWriter::~FileWriter() { Abort(); }

bool FileWriter::direct() const { return file_ != nullptr && file_->direct(); }

Status FileWriter::WriteBlock(uint32_t index, const void* data, uint32_t crc) {
  if (fs_ == nullptr) return Status::State(temp_path_ + ": writer already committed or aborted");
  if (index >= layout_.blocks.size()) {
    return Status::InvalidArgument(temp_path_ + ": block " + std::to_string(index) +
                                   " out of range (" + std::to_string(layout_.blocks.size()) +
                                   " blocks)");
  }
  if (written_[index]) {
    return Status::InvalidArgument(temp_path_ + ": block " + std::to_string(index) +
                                   " written twice");
  }
  const Layout::Block& b = layout_.blocks[index];
  if (!file_->direct()) {
    CAIRN_RETURN_IF_ERROR(file_->WriteAt(data, b.length, b.offset));
  } else {
    const size_t n = AlignUp(b.length);
    if (reinterpret_cast<uintptr_t>(data) % kAlignment == 0) {
      // Reads n - length bytes of zero padding past the payload (contract).
      CAIRN_RETURN_IF_ERROR(file_->WriteAt(data, n, b.offset));
    } else {
      AlignedBuffer bounce = AllocAligned(n);
      if (!bounce) return Status::NoMemory(temp_path_ + ": cannot allocate a bounce buffer");
      std::memcpy(bounce.get(), data, b.length);
      CAIRN_RETURN_IF_ERROR(file_->WriteAt(bounce.get(), n, b.offset));
    }
  }
  crcs_[index] = crc;
  written_[index] = true;
  return Status::Ok();
}

Status FileWriter::Commit() {
  if (fs_ == nullptr) return Status::State(temp_path_ + ": writer already committed or aborted");
  for (size_t i = 0; i < written_.size(); ++i) {
    if (!written_[i]) {
      return Status::State(temp_path_ + ": commit with block " + std::to_string(i) +
                           " not written");
    }
  }
  // The table area runs from data_end (aligned) to the end of the file; one
  // aligned write holds the tables, the zero padding and the footer.
  const uint64_t table_bytes = TableBytes(layout_, info_.name.size());
  const uint64_t file_bytes = FileBytes(layout_, info_.name.size());
  const size_t area = file_bytes - layout_.data_end;
  AlignedBuffer buf = AllocAligned(area);
  if (!buf) {
    Abort();
    return Status::NoMemory(temp_path_ + ": cannot allocate " + std::to_string(area) +
                            " bytes for the tables");
  }
  EncodeTables(layout_, crcs_, info_.name, buf.get());
  Footer f;
  f.table_offset = layout_.data_end;
  f.table_bytes = table_bytes;
  f.table_crc = crc32c::Value(buf.get(), table_bytes);
  f.name_len = static_cast<uint32_t>(info_.name.size());
  f.number = info_.number;
  f.kind = info_.kind;
  f.format_version = layout_.format_version;
  f.extent_count = static_cast<uint32_t>(layout_.extents.size());
  f.file_bytes = file_bytes;
  EncodeFooter(f, buf.get() + area - kFooterBytes);

  Status s = file_->WriteAt(buf.get(), area, layout_.data_end);
  if (s.ok() && options_.fsync) s = file_->Sync();
  if (s.ok()) s = file_->Close();
  if (s.ok()) s = fs_->Rename(temp_path_, final_path_);
  if (!s.ok()) {
    Abort();
    return s;
  }
  // The temp name is gone: the writer is done either way.
  committed_ = true;
  os::FileSystem* fs = fs_;
  fs_ = nullptr;
  if (options_.fsync) {
    Status ds = fs->SyncDir(DirName(final_path_));
    if (!ds.ok()) {
      // The rename may not survive a crash. Withdraw the file so that no
      // reader trusts a version its writer reports as failed.
      (void)fs->Remove(final_path_);
      return ds.WithContext("directory sync after rename failed, version withdrawn");
    }
  }
  return Status::Ok();
}

void FileWriter::Abort() {
  if (fs_ == nullptr) return;
  if (file_ != nullptr) (void)file_->Close();
  // kNotFound: already gone; other errors leave a stale temp file, which
  // `cairn gc` removes later. Either way there is nothing better to do here.
  (void)fs_->Remove(temp_path_);
  fs_ = nullptr;
}

}  // namespace cairn::format
