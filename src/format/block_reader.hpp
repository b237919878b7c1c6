// ReadBlocks: reads a set of blocks of a data file at the device's speed and
// verifies each one as it lands (docs/design.md, "Restore from files").
//
// `queue_depth` reads are in flight at once: one on the calling thread and
// one on each of queue_depth - 1 helper std::jthreads, each with its own
// os::File (File is not thread-safe). Workers take the blocks in plan order
// from a shared counter, so the device sees a few large, nearly sequential
// requests. Each worker computes the CRC32C of what it read right away, while
// the other reads are still in flight: checksums overlap with I/O and every
// byte is read once.
//
// With `direct` the file is opened with O_DIRECT (bypassing the page cache
// and its copy), falling back to buffered reads when the file system refuses
// it. Restores read checkpoint files with O_DIRECT when their tier writes
// them so, history steps buffered (docs/design.md says why). A block for
// host memory is read straight into it (with O_DIRECT only when the
// destination is 4 KiB-aligned, the length a multiple of 4 KiB and the entry
// not marked `stage`); any other block is read, in pieces of at most
// kStagingBytes, into the worker's staging buffer (huge pages, 2 MiB-aligned)
// and copied out (memcpy for host memory, `copy_out` for device or managed
// memory; copy_out calls are serialized).
//
// The first damaged block (in plan order among those read) stops the others
// and is returned as the same kCorrupt that FileReader::ReadBlock gives,
// naming the file, the block, its region id and offset. On error the
// destinations hold partial data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "format/file_reader.hpp"
#include "os/fs/fs.hpp"

namespace cairn::format {

// Part of a block's payload that goes somewhere (a scattered read: a block
// of a layered version's packed stream holds pieces of several extents, and
// some of them may be hidden by a newer layer).
struct ScatterPiece {
  uint32_t offset = 0;  // within the block's payload
  uint32_t bytes = 0;
  void* dst = nullptr;
};

struct BlockRead {
  uint32_t block = 0;   // index into the file's block table
  void* dst = nullptr;  // where the block's payload (length bytes) goes
  bool host = true;     // false: dst is device/managed memory, written through copy_out
  // Host memory in small pages: an O_DIRECT read goes through the worker's
  // huge-page staging buffer and a memcpy, which beats a direct read into
  // small pages 2-3x (os/mem/page_backing.hpp says why). Ignored for buffered reads.
  bool stage = false;
  // Non-empty: the block is read whole (and verified) through the staging
  // buffer, and only these pieces (sorted by offset) are copied out; dst is
  // unused.
  std::span<const ScatterPiece> pieces;
};

// Copies n bytes from host memory src to a non-host destination.
using CopyOutFn = std::function<Status(void* dst, const void* src, size_t n)>;

// Largest single read and the size of each worker's staging buffer.
inline constexpr size_t kStagingBytes = 4u << 20;

// Staging buffers kept across ReadBlocks calls that run one after the other
// (a chain's links): a worker takes one for its call and gives it back, so
// the buffers are mapped and faulted in once, not once per call (mapping and
// zeroing 4 workers' 4 MiB per link cost a depth-10 chain restore a third of
// its time). Thread-safe.
class StagingPool {
 public:
  StagingPool();
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  struct Buffer;
  // A buffer of kStagingBytes at a 2 MiB boundary (huge pages where THP
  // allows): one kept, else a new one.
  Result<std::unique_ptr<Buffer>> Take();
  void Give(std::unique_ptr<Buffer> b);
  static uint8_t* Data(const Buffer& b);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct ReadBlocksOptions {
  unsigned queue_depth = 4;  // reads in flight; 4 large reads keep an NVMe or RAID busy
  bool direct = false;       // try O_DIRECT
  StagingPool* staging = nullptr;  // null: each call maps its own. Not owned
};

// Runs work() on the caller and on up to workers - 1 helper threads (fewer
// when the system has no thread to spare: same result, less in flight), and
// returns once every one of them returned.
void RunWorkers(size_t workers, const std::function<void()>& work);

// Reads and verifies every block of `plan` (opened again through `fs` by
// each worker). `copy_out` may be empty when every entry is host memory.
Status ReadBlocks(os::FileSystem* fs, const FileReader& file, std::span<const BlockRead> plan,
                  const CopyOutFn& copy_out, const ReadBlocksOptions& options = {});

}  // namespace cairn::format
