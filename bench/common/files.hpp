// POSIX helpers of cairn-bench: errno as Status, the run directory, aligned and
// pre-touched buffers. The benchmark deliberately does its own I/O instead of
// using Cairn's os layer, so that the baseline and the limits measure plain
// system calls and do not depend on the library's file system code; only the
// errno-to-Status mapping is the library's (os::ErrnoStatus).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "cairn/status.hpp"
#include "os/fs/fs.hpp"

namespace cairn::bench {

// "<op> <path>: <strerror(err)>", with the library's errno-to-Code mapping.
using os::ErrnoStatus;

// mkdir -p with mode 0700. OK if the directory exists.
Status MakeDirs(const std::string& path);
// Removes `path` and everything below it; OK if it does not exist.
Status RemoveTree(const std::string& path);
// Removes everything below `path` but keeps the directory (creating it when
// missing).
Status EmptyDir(const std::string& path);
// A fresh directory "cairn-bench-XXXXXX" under $TMPDIR (or /tmp).
Result<std::string> MakeTempDir();

// True when `dir`'s file system accepts O_DIRECT (probes with a small file).
bool DirectIoSupported(const std::string& dir);

// Memory aligned to 2 MiB (so O_DIRECT and huge pages work), freed by the
// deleter. Touch() writes every page once so that later use does not pay the
// first-touch cost (on this VM about 1.5 s/GiB).
struct FreeDeleter {
  void operator()(uint8_t* p) const noexcept;
};
using Buffer = std::unique_ptr<uint8_t[], FreeDeleter>;
Result<Buffer> AllocateBuffer(size_t bytes);
void TouchPages(uint8_t* p, size_t bytes);

// Writes/reads all n bytes at offset, retrying short transfers and EINTR.
Status WriteAll(int fd, const void* data, size_t n, uint64_t offset, const std::string& path);
// Returns the bytes read; fewer than n only at end of file.
Result<size_t> ReadAll(int fd, void* data, size_t n, uint64_t offset, const std::string& path);

// A cold sequential read of `path` from offset 0: up to `limit` bytes (to the
// end of the file when smaller) in `chunk_bytes` pieces into `chunk`, with
// O_DIRECT when `direct` (chunk aligned, chunk_bytes a multiple of 4 KiB);
// buffered reads first write back and drop the file's pages (best effort).
// The clock runs from the first read to the last.
struct ReadTiming {
  double seconds = 0;
  uint64_t bytes = 0;
};
Result<ReadTiming> TimedColdRead(const std::string& path, uint8_t* chunk, size_t chunk_bytes,
                                 bool direct, uint64_t limit = UINT64_MAX);

}  // namespace cairn::bench
