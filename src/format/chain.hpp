// A layered version and its bases (docs/format.md 4.1, 4.6 items 8-11, 4.7).
//
// Chain::Open opens a version and follows its base references down to a full
// version, checking every link: the base exists, is version 2, has the
// content id the reference expects, has a smaller depth, and the same region set.
// A broken link is reported naming both ends ("PATH: v7 -> base v5:
// missing (BASE PATH)"): kNotFound for a missing base, kCorrupt otherwise.
//
// ChainPlan turns "restore these regions (or windows of them) into these
// buffers" into block reads per file: every byte comes from the newest link
// that stores it, blocks that hold no visible byte are not read, and each
// file's blocks are read once through format::ReadBlocks (CRCs checked as
// they land). A version-1 or full version-2 file is a chain of one link.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "format/block_reader.hpp"
#include "format/file_reader.hpp"
#include "format/layout.hpp"
#include "os/fs/fs.hpp"

namespace cairn::format {

class Chain {
 public:
  // Opens <dir>/<name>/v<number>.cairn (h... for history steps) and its bases.
  static Result<Chain> Open(os::FileSystem* fs, const std::string& dir, const std::string& name,
                            int64_t number, EntryKind kind = EntryKind::kCheckpoint);

  // links()[0] is the version asked for, links().back() the full version.
  const std::vector<std::unique_ptr<FileReader>>& links() const { return links_; }
  const FileReader& tip() const { return *links_.front(); }
  // Links below the tip (the tip's recorded depth is an upper bound: it
  // exceeds this when a link of the chain was compacted).
  uint32_t depth() const { return static_cast<uint32_t>(links_.size() - 1); }
  // Bytes stored by all links together (an upper bound of what a restore reads).
  uint64_t stored_bytes() const;
  // Reads and verifies every block of every link (and version 2's padding);
  // a base's damage is reported as "TIP: v7 -> base v5: <damage>".
  Status VerifyAll();

 private:
  std::vector<std::unique_ptr<FileReader>> links_;
};

// Where (part of) one region of the tip goes.
struct RegionTarget {
  int32_t id = 0;
  void* dst = nullptr;  // receives region bytes [offset, offset + bytes)
  bool host = true;     // false: written through the CopyOutFn
  uint64_t offset = 0;
  uint64_t bytes = std::numeric_limits<uint64_t>::max();  // clipped to the region's end
  bool stage = false;  // host memory in small pages: BlockRead::stage for its whole blocks
};

class ChainPlan {
 public:
  // kInvalidArgument for an unknown region id or a window outside the region.
  static Result<ChainPlan> Make(const Chain& chain, std::span<const RegionTarget> targets);
  ChainPlan(ChainPlan&&) = default;  // spans stay valid: vectors move their buffers
  ChainPlan& operator=(ChainPlan&&) = default;

  // Reads the planned blocks, file by file; stops at the first error.
  Status Execute(os::FileSystem* fs, const CopyOutFn& copy_out,
                 const ReadBlocksOptions& options = {}) const;
  // Payload bytes of the blocks that Execute reads, per link (index as links()).
  std::vector<uint64_t> read_bytes() const;

 private:
  ChainPlan() = default;
  struct LinkReads {
    const FileReader* file = nullptr;
    std::vector<BlockRead> reads;
    std::vector<ScatterPiece> pieces;  // BlockRead::pieces point in here
  };
  std::vector<LinkReads> links_;
  friend class ChainPlanner;
};

// ChainPlan::Make + Execute.
Status RestoreChain(os::FileSystem* fs, const Chain& chain, std::span<const RegionTarget> targets,
                    const CopyOutFn& copy_out = {}, const ReadBlocksOptions& options = {});

}  // namespace cairn::format
