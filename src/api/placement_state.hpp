// A client's placement bookkeeping (docs/design.md, "Placement"): the
// threads the application registered, the record a checkpoint hands to the
// pipeline, the binding around a restore, and the affinities of the last
// restored version for RestoreAffinity. Placement is advisory: nothing here
// fails a checkpoint or a restore.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cairn/status.hpp"
#include "engine/pipeline.hpp"
#include "engine/placement.hpp"
#include "format/placement.hpp"
#include "os/mem/numa.hpp"
#include "util/mutex.hpp"

namespace cairn::placement {

class State {
 public:
  State(os::Numa* numa, bool record, core::PlacementMode mode) : numa_(numa), record_(record), mode_(mode) {}

  // Remembers the calling thread under `index` (>= 0); registering an index
  // again replaces its thread.
  Status RegisterThread(int index) CAIRN_EXCLUDES(mu_);
  // The record of a checkpoint of these sources (host regions only), with
  // the affinities of the calling thread (index -1) and of the registered
  // threads that still exist; null when recording is off or the page query
  // fails.
  std::shared_ptr<const format::Placement> Record(int64_t number, const std::vector<core::CaptureSource>& sources)
      CAIRN_EXCLUDES(mu_);
  // Before a restore: binds the host targets to `p`'s runs (per the mode).
  std::vector<core::BoundRange> Bind(const format::Placement* p, const std::vector<core::RestoreTarget>& targets);
  // After it: default policy again; `p` becomes what RestoreAffinity uses
  // (none: RestoreAffinity says kState).
  void Restored(const std::vector<core::BoundRange>& bound, std::optional<format::Placement> p) CAIRN_EXCLUDES(mu_);
  // Sets the calling thread's CPU affinity to the one recorded under
  // `index` (-1: the checkpointing thread) in the last restored version,
  // CPUs past this machine's wrapped around (core::MapCpus). keep: no-op.
  Status RestoreAffinity(int index) CAIRN_EXCLUDES(mu_);

  core::PlacementMode mode() const { return mode_; }

 private:
  os::Numa* numa_;
  const bool record_;
  const core::PlacementMode mode_;
  Mutex mu_;
  std::map<int, pid_t> threads_ CAIRN_GUARDED_BY(mu_);
  std::optional<format::Placement> restored_ CAIRN_GUARDED_BY(mu_);
};

}  // namespace cairn::placement
