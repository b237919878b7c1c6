// The naive synchronous checkpoint library that cairn-bench compares Cairn
// against (the paper's "blocking" baseline): every operation runs to
// completion on the application thread.
//   Write: one file per checkpoint: open, write in 4 MiB pieces, fsync (unless
//          disabled), close.
//   Read:  open, read() the whole file into the destination, close; optionally
//          unlink it (a consumed adjoint step).
// No cache, no threads, no O_DIRECT: the page cache is whatever the kernel
// makes of it, exactly as for a naive library.
// With device or managed application memory (--memory) the library does what
// a naive GPU code does: cuMemcpyDtoH into a host staging buffer before the
// write, cuMemcpyHtoD from it after the read, on the application thread (so
// the copy is part of the blocking time, not of write_seconds()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cairn/status.hpp"
#include "common/files.hpp"
#include "driver/bench_buffer.hpp"

namespace cairn::bench {

class SyncStore {
 public:
  // Uses (and creates) directory `dir`. staging_bytes > 0: allocates (and
  // touches) the host staging buffer for device/managed memory.
  static Result<SyncStore> Open(const std::string& dir, bool fsync, size_t staging_bytes = 0);

  // Writes application memory [0, n) of `src` as file `name`, replacing it.
  Status Write(const std::string& name, const BenchBuffer& src, size_t n);
  // Reads file `name` into `dst`'s application memory (capacity bytes).
  // Returns its size; kSizeMismatch if it is larger than capacity. Unlinks it
  // when `consume`.
  Result<size_t> Read(const std::string& name, BenchBuffer& dst, size_t capacity, bool consume);
  Status Remove(const std::string& name);
  // Names of the files in the directory.
  Result<std::vector<std::string>> List() const;

  // Seconds spent inside write() and fsync() (the "flush" of the baseline).
  double write_seconds() const { return write_s_; }
  uint64_t bytes_written() const { return written_; }

 private:
  SyncStore(std::string dir, bool fsync) : dir_(std::move(dir)), fsync_(fsync) {}
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  // The host-memory write and read.
  Status WriteHost(const std::string& name, const void* data, size_t n);
  Result<size_t> ReadHost(const std::string& name, void* dst, size_t capacity, bool consume);

  std::string dir_;
  bool fsync_;
  double write_s_ = 0;
  uint64_t written_ = 0;
  Buffer staging_;  // device/managed memory: the host side of the copies
  size_t staging_bytes_ = 0;
};

}  // namespace cairn::bench
