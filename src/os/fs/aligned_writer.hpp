// Writes of any offset and length into a file opened for direct I/O.
//
// Why: O_DIRECT takes only whole aligned blocks from aligned memory, but
// some of Cairn's files have pieces that are not on block boundaries (a
// parity file's rows follow a header of 40 + 24 m bytes, docs/format.md
// 3.9; a rebuilt bundle's files end anywhere). Written buffered, they went
// through fresh page-cache memory, which on the development VM ran at a
// tenth of the disk's direct rate with four writers (docs/results/
// 2026-12-07-partner-direct-io.md). This writer sends every block a write
// covers whole straight to the file, through one aligned bounce buffer, and
// keeps the blocks a write covers only in part in memory until they are
// whole or Finish writes them, so the file's bytes are what the same
// buffered writes would have made.
#pragma once

#include <bitset>
#include <cstddef>
#include <cstdint>
#include <map>

#include "cairn/status.hpp"
#include "os/fs/fs.hpp"
#include "os/mem/memory.hpp"

namespace cairn::os {

class AlignedWriter {
 public:
  // `file` outlives this object. Where file->direct() is false every write
  // goes to it as given (nothing is held back).
  explicit AlignedWriter(File* file) : file_(file) {}
  AlignedWriter(const AlignedWriter&) = delete;
  AlignedWriter& operator=(const AlignedWriter&) = delete;

  // Bytes [offset, offset + n) of the file are data's (n may be 0). A block
  // held in part that already reached the file (a rewrite, or a write out
  // of order) is read back first, so earlier bytes stay.
  Status WriteAt(const uint8_t* data, size_t n, uint64_t offset);
  // Writes the blocks still held in part and cuts the file to the end of
  // the furthest write, so that it has exactly the bytes written. Call
  // once, before File::Sync; no write may follow (kInternal).
  Status Finish();

  // Blocks held in part (for tests).
  size_t held() const { return partial_.size(); }

 private:
  static constexpr uint64_t kBlock = kDirectIoAlignment;
  static constexpr size_t kBounce = 4u << 20;
  struct Partial {
    DirectBuffer bytes;
    std::bitset<kBlock> filled;
  };
  // The whole blocks [first, first + count) from `data`.
  Status WriteBlocks(const uint8_t* data, uint64_t first, uint64_t count);
  // The part [from, to) of block b (within it) from `data`.
  Status WritePart(const uint8_t* data, uint64_t b, size_t from, size_t to);
  Status Flush(uint64_t b, const Partial& p);

  File* const file_;
  std::map<uint64_t, Partial> partial_;  // block index -> bytes held
  DirectBuffer bounce_;
  uint64_t on_file_ = 0;  // bytes the file has (a multiple of kBlock)
  uint64_t end_ = 0;      // the furthest byte written + 1
  bool finished_ = false;
};

}  // namespace cairn::os
