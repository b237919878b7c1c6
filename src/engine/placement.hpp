// Placement of host regions and threads (docs/design.md, "Placement"):
// recorded at checkpoint (which NUMA node holds each granule of a region,
// which CPUs a thread may run on) and restored at restart (the region's
// pages bound to, and moved onto, the recorded node while the restore
// writes them; a thread's CPU set). Everything goes through os::Numa, so the
// tests run several simulated nodes on this one-node machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "cairn/status.hpp"
#include "format/placement.hpp"
#include "os/mem/numa.hpp"

namespace cairn::core {

// restart.placement (docs/config.md).
enum class PlacementMode { kRestore, kKeep, kInterleave };
Result<PlacementMode> ParsePlacementMode(std::string_view text);  // kConfig names the value

// The node of one page per `granule` bytes of [data, data + bytes), as runs.
// One move_pages call per 4096 samples: 512 look-ups for 1 GiB at 2 MiB.
Result<format::RegionPlacement> RecordRegion(os::Numa& numa, int32_t id, const void* data, size_t bytes,
                                             uint32_t granule);

// The recorded node of byte `offset` of the region (-1: unknown, or past
// the runs).
int NodeAt(const format::RegionPlacement& r, uint64_t offset);

// Where recorded node k goes on a machine of `nodes` nodes: k itself when it
// exists, else k mod nodes (docs/design.md, "Topology mismatch").
int MapNode(int recorded, int nodes);
// A recorded CPU set on this machine: CPUs that exist are kept; a CPU past
// this machine's is mapped to the CPU at position cpu mod cpus() in the
// ascending list of this machine's CPUs. Never empty for a non-empty input.
std::vector<int> MapCpus(const std::vector<int>& recorded, const os::Topology& topology);

// A range bound by ApplyRegion, to be returned to the default policy.
struct BoundRange {
  void* addr = nullptr;
  size_t bytes = 0;
};

// Binds the page-aligned inside of each run of `r` (kRestore: to its mapped
// node, runs of node -1 untouched; kInterleave: the whole region over all
// nodes; kKeep: nothing) with MPOL_MF_MOVE, so that pages a restore touches
// are allocated there and pages already resident elsewhere move. Appends the
// bound ranges to `bound` even on error (the caller unbinds them).
Status ApplyRegion(os::Numa& numa, const format::RegionPlacement* r, void* data, size_t bytes,
                   PlacementMode mode, std::vector<BoundRange>* bound);
// Default policy again for every bound range (the restored pages stay).
Status Unbind(os::Numa& numa, const std::vector<BoundRange>& bound);

}  // namespace cairn::core
