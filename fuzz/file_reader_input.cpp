// ReadFileInput (fuzz/inputs.hpp): the bytes go into a memfd, opened by path
// (/proc/self/fd/N) through os::FileSystem::Default(), so the real PosixFs
// serves every read. Only the public reader API is used (FileReader::Open,
// then every block read), so another format version is covered as soon as
// the reader accepts it; only the repair pass (Repair) knows v1's offsets.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "format/block_reader.hpp"
#include "format/file_reader.hpp"
#include "fuzz/inputs.hpp"
#include "util/crc32c.hpp"

namespace cairn::fuzz {
namespace {

using format::FileReader;

// Everything a reader of a file does: open it, verify every block (cairn
// verify), read every region (restore's sequential path) and every block with
// ReadBlocks, buffered and direct (restore's parallel path; one worker, so
// that runs are deterministic).
Status ReadEverything(os::FileSystem* fs, const std::string& path) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<FileReader> r, FileReader::Open(fs, path));
  Status first = r->VerifyAll();
  const format::Layout& layout = r->layout();
  std::vector<std::unique_ptr<uint8_t[]>> regions;
  std::vector<format::BlockRead> plan;
  for (uint32_t i = 0; i < layout.regions.size(); ++i) {
    const format::Layout::Region& reg = layout.regions[i];
    (void)r->FindRegion(reg.spec.id);
    // Open() bounds every region by the file's size. A block list covers the
    // region's stored (packed, format v2) stream: hold the larger of the two.
    regions.emplace_back(new uint8_t[std::max(reg.spec.bytes, reg.stored_bytes) + 1]);
    (void)r->ReadRegion(i, regions.back().get());
    for (uint32_t j = 0; j < reg.block_count; ++j) {
      plan.push_back({.block = reg.first_block + j,
                      .dst = regions.back().get() + uint64_t{j} * layout.block_bytes});
    }
  }
  for (bool direct : {false, true}) {
    (void)format::ReadBlocks(fs, *r, plan, {}, {.queue_depth = 1, .direct = direct});
  }
  (void)r->ReadBlock(static_cast<uint32_t>(layout.blocks.size()), nullptr);  // out of range
  return first;
}

uint32_t Get32(const uint8_t* p) {
  return p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24;
}
uint64_t Get64(const uint8_t* p) { return Get32(p) | uint64_t{Get32(p + 4)} << 32; }
void Put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

void Put64(uint8_t* p, uint64_t v) {
  Put32(p, static_cast<uint32_t>(v));
  Put32(p + 4, static_cast<uint32_t>(v >> 32));
}

// Repairs in place what a mutation most often breaks first, with v1's
// offsets (docs/format.md 2.1 and 2.4): the file size the header (at 56) and
// the footer (at 40) record, and the checksums: the header's at 64 over
// [0, 64); the footer (the last 64 bytes) holds the table offset at 0, its
// size at 8 and its CRC at 16, and its own CRC at 52 over [0, 52).
// Returns whether anything changed.
bool Repair(std::vector<uint8_t>& f) {
  if (f.size() < format::kHeaderBytes + format::kFooterBytes) return false;
  const std::vector<uint8_t> before = f;
  uint8_t* footer = f.data() + f.size() - format::kFooterBytes;
  Put64(&f[56], f.size());
  Put64(footer + 40, f.size());
  Put32(&f[64], crc32c::Value(f.data(), 64));
  const uint64_t table_offset = Get64(footer), table_bytes = Get64(footer + 8);
  if (table_offset <= f.size() && table_bytes <= f.size() - table_offset) {
    Put32(footer + 16, crc32c::Value(f.data() + table_offset, table_bytes));
  }
  Put32(footer + 52, crc32c::Value(footer, 52));
  return f != before;
}

// One memfd, rewritten for each input and closed with the object.
class MemFile {
 public:
  MemFile() : fd_(::memfd_create("fuzz.cairn", MFD_CLOEXEC)) {}
  ~MemFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  Result<std::string> Set(const uint8_t* data, size_t size) {
    if (fd_ < 0) return os::ErrnoStatus(errno, "memfd_create", "fuzz.cairn");
    if (::ftruncate(fd_, 0) != 0) return os::ErrnoStatus(errno, "ftruncate", "fuzz.cairn");
    for (size_t done = 0; done < size;) {
      const ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n < 0) return os::ErrnoStatus(errno, "write", "fuzz.cairn");
      done += static_cast<size_t>(n);
    }
    return "/proc/self/fd/" + std::to_string(fd_);
  }

 private:
  int fd_;
};

}  // namespace

Status ReadFileInput(const uint8_t* data, size_t size) {
  static MemFile file;  // one memfd for the whole fuzzing run
  os::FileSystem* fs = os::FileSystem::Default();
  CAIRN_ASSIGN_OR_RETURN(std::string path, file.Set(data, size));
  const Status as_given = ReadEverything(fs, path);
  std::vector<uint8_t> fixed(data, data + size);
  if (Repair(fixed)) {
    CAIRN_ASSIGN_OR_RETURN(path, file.Set(fixed.data(), fixed.size()));
    (void)ReadEverything(fs, path);
  }
  return as_given;
}

}  // namespace cairn::fuzz
