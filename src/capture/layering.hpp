// Layering: what each checkpoint version stores when checkpoint.changes is
// not `full` (docs/design.md, "Layered captures"). The capture asks Plan for
// a version's layout before it copies anything: a full version-2 layout, or a
// layered one whose regions store only the extents that changed since the
// previous capture of the same name (its base, committed or still in flight:
// the pipeline commits a layer after its base and fails it with its base).
// The copy then moves just those extents, packed, into the host cache, and
// the rest of the pipeline (checksums, flush, persistence) treats the entry
// like any other.
//
// It owns, per checkpoint name, one change detector per region
// (capture/changes.hpp) and the content ids of the versions it planned (a
// layered version names its base's id), and per client one os::PageTracker
// shared by every region that `pages` or `auto` tracks. A region tracked
// under several names gets every write reported to each name (TrackedRange).
//
// Thread-safety: Plan runs on the capturing thread (one at a time: captures
// are serialized); Committed, Dropped and stats from any thread, also while a
// Plan hashes (Plan holds mu_ only around bookkeeping, never across a
// detector). Lock order: Pipeline::mu_, then mu_, then a detector's.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cairn/cairn.hpp"
#include "capture/changes.hpp"
#include "format/layout.hpp"
#include "util/mutex.hpp"
#include "util/thread_annotations.hpp"

namespace cairn::os {
class PageTracker;
}  // namespace cairn::os

namespace cairn::core {

// One region to capture: where its bytes are now.
struct CaptureSource {
  format::RegionSpec spec;
  const void* data = nullptr;
  // The region's own checkpoint.changes (ProtectOptions); unset: the client's.
  std::optional<ChangeDetection> changes;
};

// The region specs of `sources`, in order.
std::vector<format::RegionSpec> SpecsOf(const std::vector<CaptureSource>& sources);

// What one Plan decided (for the capture's stats).
struct LayerPlan {
  format::Layout layout;
  uint64_t bytes_examined = 0;  // host bytes offered to detection
};

class TrackedRanges;

class Layering {
 public:
  Layering(const ChangeOptions& options, uint32_t block_bytes);
  ~Layering();  // stops tracking: no protection is left on application memory
  Layering(const Layering&) = delete;
  Layering& operator=(const Layering&) = delete;

  // checkpoint.changes != full: versions are planned here (format v2). A
  // region may ask for detection under a client in `full` (and the reverse).
  bool enabled() const { return options_.mode != ChangeDetection::kFull; }

  // The layout of `version` of `name`, whose regions are `sources` (host
  // memory readable now; device and managed regions are stored full). With
  // detection off for the client and every region: Layout::Make (format v1),
  // as before layering existed.
  // Layered when every host region's detector has a baseline that may still
  // commit, in a chain shorter than max_layers, and the region set is the
  // base's; a
  // region whose detector says full is stored whole inside a layered
  // version. Never fails: a detector error makes that region full (counted
  // as a fallback, its first reason kept in stats).
  LayerPlan Plan(const std::string& name, int64_t version, const std::vector<CaptureSource>& sources);

  // `version` of `name` was committed to the local tier (after its base).
  void Committed(const std::string& name, int64_t version) CAIRN_EXCLUDES(mu_);
  // It failed or was dropped before committing: neither it nor a version
  // layered on it is a baseline again.
  void Dropped(const std::string& name, int64_t version) CAIRN_EXCLUDES(mu_);

  // A restore is about to write host memory [data, data + bytes): tracked
  // memory there is released (no write faults during the restore, no
  // read(2) into protected pages) and reported whole at its next capture.
  void BeforeRestore(const void* data, uint64_t bytes) CAIRN_EXCLUDES(mu_);

  // checkpoint.changes = pages under zero-copy captures: the zero-copy
  // engine's watch of first writes is the regions' page source (an
  // os::PageTracker would own the write protection zero-copy needs). Set
  // before the first Plan; `auto` keeps the tracker.
  using PageSourceFactory = std::function<std::unique_ptr<PageSource>(const void* data, uint64_t bytes)>;
  void SetPageSources(PageSourceFactory f) CAIRN_EXCLUDES(mu_);

  // Totals over every detector this client made, live and replaced.
  ChangeStats stats() const CAIRN_EXCLUDES(mu_);

  // A region as the last Plan of a name saw it, with its detector.
  struct CaptureRegion {
    format::RegionSpec spec;
    const void* data = nullptr;
    ChangeDetection mode = ChangeDetection::kFull;  // in effect for it
    std::shared_ptr<ChangeDetector> detector;  // null: stored full (not host memory)
  };

 private:
  struct Planned {
    uint64_t content_id = 0;
    uint32_t depth = 0;
    bool committed = false;
  };
  struct Name {
    std::vector<CaptureRegion> regions;   // as in the last Plan, in source order
    std::map<int64_t, Planned> versions;  // planned and not dropped
  };

  // The detectors for these sources: kept while the region set, sizes and
  // addresses stay the same, else made anew (their first result is full).
  std::vector<std::shared_ptr<ChangeDetector>> Detectors(Name& n, const std::vector<CaptureSource>& sources)
      CAIRN_REQUIRES(mu_);
  Result<std::unique_ptr<ChangeDetector>> MakeDetector(const CaptureSource& s) CAIRN_REQUIRES(mu_);
  void Retire(const std::shared_ptr<ChangeDetector>& d) CAIRN_REQUIRES(mu_);
  void NoteFallback(const std::string& why) CAIRN_REQUIRES(mu_);

  const ChangeOptions options_;
  const uint32_t block_bytes_;
  mutable Mutex mu_;
  std::map<std::string, Name> names_ CAIRN_GUARDED_BY(mu_);
  std::unique_ptr<TrackedRanges> ranges_ CAIRN_GUARDED_BY(mu_);  // made at the first tracked region
  PageSourceFactory page_sources_ CAIRN_GUARDED_BY(mu_);  // set: `pages` regions use it, not ranges_
  ChangeStats stats_ CAIRN_GUARDED_BY(mu_);      // versions, fallbacks, notes
  ChangeCounters retired_ CAIRN_GUARDED_BY(mu_);  // counters of replaced detectors
  std::vector<std::shared_ptr<ChangeDetector>> live_ CAIRN_GUARDED_BY(mu_);
};

}  // namespace cairn::core
