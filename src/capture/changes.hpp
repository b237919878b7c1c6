// Change detection: at a capture, which extents of a region changed since
// the version the new one is relative to (docs/design.md, "Change
// detection"). The one seam between the capture and the ways of knowing:
//
//   full   everything, always (no detection)
//   hash   a 128-bit hash per chunk (util/hash128.hpp), compared with the
//          hashes of the baseline version; any memory the capture can read
//          (device regions: after their drain to the host)
//   pages  written pages reported by a PageSource (os::PageTracker behind a
//          small adapter: userfaultfd write-protection)
//   auto   pages where a PageSource works, else hash; and a region that
//          changes mostly everywhere is written full without detection for a
//          while (AI-Ckpt's "deactivate monitoring"; AutoPolicy)
//
// One detector per (checkpoint name, region): versions of one name form the
// chains. Versions may be captured before earlier ones commit (the flush is
// asynchronous): each is relative to the newest version that may still
// commit, in flight or committed (Accept), so a version stores what changed
// since the previous capture, however far the flush lags. The caller commits
// a layered version only after its base and abandons it when its base
// fails; a version that fails (Abandon) is never a base again, nor is any
// version layered on it, so the next one is relative to the newest version
// still standing and never refers to data that was never stored.
//
// Thread-safety: Detect for one detector is called by one thread at a time
// (the capture); Accept, Abandon and Reset may come from any thread (the
// flusher commits) concurrently with it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cairn/config.hpp"
#include "cairn/status.hpp"
#include "util/extent.hpp"
#include "util/hash128.hpp"

namespace cairn::core {

class CopyEngine;

// What the capture of one region at one version stores.
struct ChangeSet {
  // A full version: the first one, after Reset, when the chain reached
  // max_layers, in mode full, or while monitoring is deactivated.
  bool full = true;
  int64_t base = -1;   // layered: the version it is relative to (committed or in flight)
  uint32_t depth = 0;  // 0 when full, else base's depth + 1 (<= max_layers)
  // Canonical extents to store: {0, bytes} when full (empty for an empty
  // region); layered: the changed extents, every other byte is base's.
  ExtentList changed;
};

// Totals since the detector was made (Stats rows are proposed from them).
struct ChangeCounters {
  uint64_t detects = 0;         // Detect calls that succeeded
  uint64_t layered = 0;         // of them, layered results
  uint64_t bytes_examined = 0;  // region bytes offered to Detect
  uint64_t bytes_changed = 0;   // bytes of the results' `changed` (= to store)
  uint64_t bytes_hashed = 0;    // bytes read by the hash detector
  uint64_t fallbacks = 0;       // auto: page tracking lost, hash from then on
  uint64_t deactivations = 0;   // auto: times monitoring was deactivated
  bool deactivated = false;     // auto: monitoring deactivated now
};

// What the `pages` detector needs from a page tracker (os::PageTracker
// satisfies it through a ~30-line adapter).
class PageSource {
 public:
  virtual ~PageSource() = default;
  // The extents (page-aligned, canonical, within the region) written since
  // the previous Collect or since tracking started, and re-arms tracking.
  // Called before the capture copies the region, so a write racing with the
  // copy is reported again next time. An error means tracking was lost
  // (munmap, mprotect, fork, uffd gone, ...): that version is written full,
  // and `auto` falls back to hashing the region from then on.
  virtual Result<ExtentList> Collect() = 0;
  // Monitoring deactivated: stop paying for tracking (e.g. drop the write
  // protection). The detector treats whatever the next Collect reports as
  // unknown (that version is full), so Collect may report nothing then.
  virtual void Suspend() {}
};

// AI-Ckpt's "deactivate monitoring", for `auto`. Defaults: docs/design.md,
// "Change detection", says why.
struct AutoPolicy {
  // A layered result with more than this fraction of the region changed is
  // "high"; `high_runs` highs in a row deactivate monitoring.
  double high_fraction = 0.5;
  int high_runs = 3;
  // Deactivated: this many captures are written full without detection,
  // then one full capture re-establishes a baseline and the next one is
  // detected again (the re-check). A high re-check doubles the wait, up to
  // `max_wait`; a low one reactivates monitoring.
  int wait = 4;
  int max_wait = 64;
};

struct ChangeOptions {
  ChangeDetection mode = ChangeDetection::kFull;
  int max_layers = 10;               // checkpoint.max_layers; 0 = never layered
  uint64_t hash_chunk = 64 << 10;    // checkpoint.hash_chunk
  CopyEngine* engine = nullptr;      // hashing helpers; nullptr = caller alone. Not owned
  AutoPolicy policy;
};

// A piece of a region's bytes in readable host memory.
struct RegionPiece {
  const void* data = nullptr;
  uint64_t bytes = 0;
};

class ChangeDetector {
 public:
  virtual ~ChangeDetector() = default;
  // The capture of `version` (of this region: `bytes` at `data`, readable
  // host memory) is about to copy it: what must it store? The result stays
  // pending until Accept(version) or Abandon(version). A size different from
  // the baseline's gives a full version (and a new baseline).
  Result<ChangeSet> Detect(int64_t version, const void* data, uint64_t bytes) {
    const RegionPiece piece{data, bytes};
    return DetectPieces(version, std::span<const RegionPiece>(&piece, 1));
  }
  // The same over a region held in pieces, in order (e.g. its copy in the
  // host cache's blocks, hashed after the capture): for `hash` every piece
  // but the last is a whole number of hash chunks (kInvalidArgument if not).
  virtual Result<ChangeSet> DetectPieces(int64_t version, std::span<const RegionPiece> pieces) = 0;
  // `version` committed (after its base): results captured before it are
  // forgotten. Unknown versions (never detected, abandoned, or dropped by
  // Reset) are ignored.
  virtual void Accept(int64_t version) = 0;
  // `version` failed or was dropped before committing: neither it nor a
  // result layered on it is a base again (the caller fails those too).
  virtual void Abandon(int64_t version) = 0;
  // The next Detect gives a full version (region set or size changed,
  // tracking lost, after a restore): every baseline and pending result is
  // dropped, and Accept of a version detected before is ignored.
  virtual void Reset() = 0;
  virtual ChangeCounters counters() const = 0;
  // "full", "hash", "pages", "auto:hash", "auto:pages" (auto: what it uses now).
  virtual const char* name() const = 0;
};

// A detector for `options.mode`. `pages` may be null: mode `pages` then
// fails with kUnsupported (naming why), `auto` hashes.
Result<std::unique_ptr<ChangeDetector>> MakeChangeDetector(const ChangeOptions& options,
                                                           std::unique_ptr<PageSource> pages);

// The 128-bit hashes of `bytes` at `data` (not null unless bytes == 0) in
// chunks of `chunk` bytes (the last one may be shorter), on the caller and
// `engine`'s helpers (null: caller).
std::vector<Hash128> HashChunks(const void* data, uint64_t bytes, uint64_t chunk, CopyEngine* engine);
// The same over pieces (every piece but the last a multiple of `chunk`).
Result<std::vector<Hash128>> HashChunks(std::span<const RegionPiece> pieces, uint64_t chunk, CopyEngine* engine);

// Canonical extents of the chunks whose hashes differ (adjacent ones merged);
// the last chunk ends at `bytes`. Precondition: equal sizes.
ExtentList DiffChunks(const std::vector<Hash128>& before, const std::vector<Hash128>& now, uint64_t chunk,
                      uint64_t bytes);

// The union of two canonical lists, canonical.
ExtentList UnionExtents(const ExtentList& a, const ExtentList& b);

}  // namespace cairn::core
