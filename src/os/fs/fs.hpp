// The OS layer for files: every file-system call Cairn makes goes through a
// FileSystem, so that tests can inject faults (ENOSPC, EIO, short writes,
// failing fsync/rename) with a wrapper (testing/fs/fault_fs.hpp).
//
// Errors come back as Status: ENOSPC/EDQUOT -> kNoSpace, ENOENT -> kNotFound,
// EEXIST -> kExists, everything else -> kIo. Messages name the operation, the
// path and strerror(errno), e.g. "write /scratch/a/v1.cairn.tmp: No space left".
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cairn/status.hpp"

namespace cairn::os {

struct OpenOptions {
  bool write = false;     // open for writing (create + truncate) instead of reading
  // With write: an existing file, opened for writing in place (neither
  // created nor truncated; kNotFound when absent): overwrites that change no
  // size, such as the global manifest's slots (docs/format.md 3.6.1).
  bool in_place = false;
  bool direct = false;    // O_DIRECT; callers fall back when kUnsupported
  uint32_t mode = 0600;   // permission bits for a created file
};

// A read-only mapping of a whole file (File::Map), unmapped when destroyed.
// Reading through it saves the copy a ReadAt makes: the bytes are the page
// cache's. Bytes(offset, n) reads a range in (MADV_POPULATE_READ) and only
// then hands out a pointer, so that a read error comes back as a Status;
// a first touch of a page not read in would raise SIGBUS in the process
// instead. What is left of that risk, and why it is acceptable for Cairn's
// files: a committed file is never truncated (it was written under a temp
// name, then renamed), so a page read in stays within the file; only a
// device error while the kernel reads back a page it dropped under memory
// pressure between Bytes and the use would still raise SIGBUS.
class FileView {
 public:
  virtual ~FileView() = default;
  // Bytes [offset, offset + n), read in; valid while the view lives. An
  // error (a range past the end, a read error, a kernel without
  // MADV_POPULATE_READ: kUnsupported) tells the caller to use ReadAt, which
  // reports a real problem with the file as it always does.
  virtual Result<const uint8_t*> Bytes(uint64_t offset, uint64_t n) = 0;
  // Starts reading [offset, offset + n) in without waiting (MADV_WILLNEED),
  // so that a later Bytes of it finds the pages there: a reader going
  // through a file window by window asks for the next window while it
  // works on this one. A hint: nothing relies on it, and the default (and
  // a range past the end) does nothing.
  virtual void WillNeed(uint64_t offset, uint64_t n) {
    (void)offset;
    (void)n;
  }
};

// An open file. Not thread-safe for concurrent use of one object.
class File {
 public:
  virtual ~File() = default;
  // Writes all n bytes at offset (retrying short writes and EINTR).
  // With direct I/O, buf, n and offset must be multiples of kDirectIoAlignment.
  virtual Status WriteAt(const void* buf, size_t n, uint64_t offset) = 0;
  // Reads exactly n bytes at offset; kCorrupt("short read") at end of file.
  virtual Status ReadAt(void* buf, size_t n, uint64_t offset) = 0;
  virtual Status Sync() = 0;           // fdatasync
  // Starts writing [offset, offset + n) back to the device without waiting
  // (sync_file_range WRITE), so that a later Sync() finds less to do when
  // a file is written piecewise. A hint that durability does not rely on:
  // the default (wrappers, file systems without it) does nothing.
  virtual Status StartWriteback(uint64_t offset, uint64_t n) {
    (void)offset;
    (void)n;
    return Status::Ok();
  }
  virtual Result<uint64_t> Size() = 0;
  // The whole file mapped read-only (FileView), for a reader that would
  // otherwise copy it out with ReadAt. kUnsupported by default (wrappers
  // such as testing/fs/fault_fs.hpp, whose faults then apply to the ReadAt the
  // caller falls back to) and for an empty file.
  virtual Result<std::unique_ptr<FileView>> Map() {
    return Status::Unsupported("mapping " + path() + ": not supported by this file system");
  }
  virtual Status Truncate(uint64_t size) = 0;
  virtual Status Close() = 0;          // idempotent; the destructor closes too
  virtual const std::string& path() const = 0;
  virtual bool direct() const = 0;
};

// Direct I/O (O_DIRECT): buffers, file offsets and lengths aligned to this
// (4 KiB, the logical block of the disks Cairn writes; docs/format.md aligns
// its files to it too).
inline constexpr size_t kDirectIoAlignment = 4096;

struct DirEntry {
  std::string name;
  bool is_dir = false;
};

struct FileInfo {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  bool is_dir = false;
  uint32_t mode = 0;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // The process-wide POSIX implementation. Never null, never freed.
  static FileSystem* Default();

  // kUnsupported when options.direct is set and the file system refuses
  // O_DIRECT (tmpfs): callers then retry buffered.
  virtual Result<std::unique_ptr<File>> Open(const std::string& path, const OpenOptions& options) = 0;
  virtual Status Rename(const std::string& from, const std::string& to) = 0;  // atomic replace
  virtual Status Remove(const std::string& path) = 0;   // file; kNotFound if absent
  virtual Status CreateDirs(const std::string& path, uint32_t mode) = 0;  // mkdir -p
  virtual Status RemoveDir(const std::string& path) = 0;  // empty directory
  virtual Status SyncDir(const std::string& path) = 0;    // fsync a directory
  virtual Result<std::vector<DirEntry>> List(const std::string& path) = 0;  // no "." ".."
  virtual Result<FileInfo> Stat(const std::string& path) = 0;
};

// fs->Open(path, options), and where options.direct is set and the file
// system refuses O_DIRECT (kUnsupported: tmpfs), the same open buffered;
// File::direct() says which it got.
Result<std::unique_ptr<File>> OpenPreferringDirect(FileSystem* fs, const std::string& path,
                                                   OpenOptions options);

// Joins path components with exactly one '/'.
std::string JoinPath(const std::string& a, const std::string& b);

// Maps an errno value to a Status: "<op> <path>: <strerror>".
Status ErrnoStatus(int err, const std::string& op, const std::string& path);

}  // namespace cairn::os
