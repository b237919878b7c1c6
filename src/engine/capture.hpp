// The capture path (application thread, and a zero-copy epoch's reader):
// a checkpoint or push is registered (BeginCapture), then copied batch by
// batch: each batch is planned under mu_ (PlanBatch: chunks and slots taken,
// the first block waiting for room), copied without it (CopyBatch) and
// sealed under it (SealBatch: queued for the checksummer or the device
// mover); EndCapture books it. A failed device copy rolls the version back
// (RollBackCapture).
//
// A Capturer holds no state of its own: it is the pipeline's capture steps,
// over the pipeline's state (nested in Pipeline, it reaches it as the
// pipeline's own members do), made for each Pipeline::Capture and for each
// zero-copy epoch's reader. Internal to the engine: capture.cpp and
// capture_room.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/pipeline.hpp"
#include "util/thread_annotations.hpp"

namespace cairn::core {

class ZeroCopyOrder;

class Pipeline::Capturer {
 public:
  explicit Capturer(Pipeline* p) : p_(p) {}

  // Pipeline::Capture (pipeline.hpp says what it promises): checks,
  // registers and copies the version, or starts its zero-copy epoch.
  Status Capture(format::EntryKind kind, const std::string& name, int64_t number,
                 const std::vector<CaptureSource>& sources,
                 std::shared_ptr<const format::Placement> placement, bool persist)
      CAIRN_EXCLUDES(p_->mu_, p_->capture_mu_);

 private:
  // One batch of a capture: the blocks [first, end) and where their bytes
  // go.
  struct CaptureBatch {
    std::vector<uint32_t> blocks;  // planned, in the order asked for
    // host -> host chunk (CPU copies), into untouched [0] and touched [1]
    // chunks: copied one after the other, so that the touch model gets both
    // rates.
    std::vector<CopySegment> host[2];
    std::vector<CopySegment> gpu;                    // device/managed -> slot or host chunk
    std::vector<bool> to_slot;                       // per block of the batch
    std::vector<std::pair<uint8_t*, size_t>> tails;  // chunk tails to zero
    bool touching_allowed = false;                   // the touch mode allowed touching meanwhile
    // Host copies with streaming stores: the capture is larger than the
    // last-level cache, so its chunks leave the caches anyway
    // (CopyEngine::Stores; StreamsCapture).
    CopyEngine::Stores stores = CopyEngine::Stores::kCached;
  };
  // Whether a capture of `bytes` copies into the cache with streaming stores:
  // from the size of a server's last-level cache on (32 MiB, our VM's L3).
  // Not asked of the system: CPUID (sysconf, glibc) claims 256 MiB here.
  // Below it, cached stores leave the blocks in the cache for the checksummer.
  static constexpr uint64_t kStreamCaptureBytes = 32ull << 20;
  static bool StreamsCapture(uint64_t bytes) { return bytes >= kStreamCaptureBytes; }

  // kUnsupported for a device or managed source without a GPU tier.
  Status CheckSources(const std::vector<CaptureSource>& sources);
  // Whether e's key may be captured now (kState when closing or the history
  // is not open, kExists when it is still in the pipeline).
  Status CheckCapturable(const Entry& e) CAIRN_REQUIRES(p_->mu_);
  // Registers the entry, whose layout is set (catalog, history, flush
  // queue); kExists/kState.
  Status BeginCapture(const EntryPtr& e, std::chrono::steady_clock::time_point t0,
                      double* interval_s) CAIRN_REQUIRES(p_->mu_);
  // Room in the host cache.
  // For a capture: the caller writes the chunk's first write_bytes bytes.
  // was_touched (optional): whether the chunk's memory was fully touched
  // before. Blocks for space (the application's blocking, capture_blocked_s);
  // before waiting it takes back the room held for the persister (Pipeline::TakeChunk).
  // `node` >= 0: a chunk on that NUMA node first (HostCache::Allocate).
  int32_t AcquireChunk(uint32_t write_bytes, bool* was_touched = nullptr, int node = -1)
      CAIRN_REQUIRES(p_->mu_);
  // Both kinds of wait (host chunks, device slots), so far.
  double CaptureBlockedSeconds() const CAIRN_REQUIRES(p_->mu_);
  // Host-cache room for the device mover while drains are pending: whether a
  // capture of `capturing` may take a chunk now, and waiting until it may.
  bool DrainRoomAfterTaking(const Entry& capturing) const CAIRN_REQUIRES(p_->mu_);
  void WaitForDrainRoom(const Entry& capturing) CAIRN_REQUIRES(p_->mu_);
  // A checkpoint starts its capture: bound for the persistent tier (the
  // persister writes it from the cache, or the mover copies its file).
  void BeginPersist(const EntryPtr& e) CAIRN_REQUIRES(p_->mu_);
  // Plans a prefix of the blocks `want` (at least the first) into `batch`:
  // slots and chunks taken, the first block waiting for room, the others
  // taking what is free right now. packed: where each of the layout's
  // extents starts in its region's packed stream (SourcePieces).
  // *held: a host chunk the caller already took for the first block (a
  // zero-copy reader takes room before it picks the block: HoldRoom); left
  // as it is (chunk >= 0) when the first block does not take it.
  struct HeldChunk {
    int32_t chunk = -1;
    bool touched = false;
  };
  void PlanBatch(const EntryPtr& e, const std::vector<CaptureSource>& sources,
                 const std::vector<uint64_t>& packed, const std::vector<uint32_t>& want,
                 CaptureBatch* batch, HeldChunk* held) CAIRN_REQUIRES(p_->mu_);
  // A zero-copy reader's room for its next block, taken before the block is
  // chosen (CaptureBlocks). The reader keeps *spares (as many
  // as zero_copy_.spares() says) for pages that go RED: a normal block waits for
  // another chunk, looking for RED pages every kRedPoll, and a RED page
  // takes a spare at once.
  static constexpr auto kRedPoll = std::chrono::microseconds(100);
  HeldChunk HoldRoom(const Entry& e, ZeroCopyOrder& order, std::vector<HeldChunk>* spares)
      CAIRN_REQUIRES(p_->mu_);
  void FreeHeld(std::vector<HeldChunk>* held) CAIRN_REQUIRES(p_->mu_);  // back to the cache
  // Copies a planned batch (no lock): device copies, then host copies, then
  // the chunk tails. Adds the device bytes and seconds to the totals.
  Status CopyBatch(CaptureBatch& batch, double copy_s[2], uint64_t copy_bytes[2], bool* touching,
                   uint64_t* gpu_bytes, double* gpu_seconds, ZeroCopy* zc) CAIRN_EXCLUDES(p_->mu_);
  // The NUMA node of each block's source (Entry::block_nodes); without mu_,
  // before the entry is published.
  std::vector<int32_t> SourceNodes(const Entry& e, const std::vector<CaptureSource>& sources);
  // Copies e's blocks into the cache, batch by batch (mu_ dropped around each
  // copy), in address order; zc: host pieces are read through the zero-copy
  // epoch instead, one block at a time in the flush order
  // (checkpoint.zero_copy_order; capture/zero_copy/zero_copy_order.hpp).
  Status CaptureBlocks(const EntryPtr& e, const std::vector<CaptureSource>& sources, ZeroCopy* zc)
      CAIRN_REQUIRES(p_->mu_);

  // Zero-copy checkpoints (zero_copy_): StartZeroCopy begins an epoch over
  // e's host memory and hands the rest of the capture to its reader thread,
  // which runs ReadZeroCopy; false when e must be copied instead.
  bool StartZeroCopy(const EntryPtr& e, const std::vector<CaptureSource>& sources,
                     std::chrono::steady_clock::time_point t0, double interval_s)
      CAIRN_REQUIRES(p_->mu_, p_->capture_mu_);
  void ReadZeroCopy(const EntryPtr& e, const std::vector<CaptureSource>& sources, ZeroCopy* zc,
                    std::chrono::steady_clock::time_point t0, double interval_s)
      CAIRN_EXCLUDES(p_->mu_);
  // A device copy failed: this version never existed.
  Status RollBackCapture(const EntryPtr& e, const CaptureBatch& batch, const Status& copied)
      CAIRN_REQUIRES(p_->mu_);
  // Seals a copied batch and queues its blocks for checksum or drain.
  void SealBatch(const EntryPtr& e, const CaptureBatch& batch) CAIRN_REQUIRES(p_->mu_);
  void EndCapture(const EntryPtr& e, std::chrono::steady_clock::time_point t0, double interval_s,
                  double blocked_before) CAIRN_REQUIRES(p_->mu_);

  Pipeline* const p_;
};

}  // namespace cairn::core
