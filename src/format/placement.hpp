// Placement records (docs/format.md 5): where a checkpoint version's host
// regions' pages were (runs of NUMA nodes) and the CPU affinity of the
// application's threads, in a small file beside the data file. Advisory: a
// missing or bad record never stops a restore.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/status.hpp"
#include "os/fs/fs.hpp"

namespace cairn::format {

inline constexpr uint32_t kPlacementRecordVersion = 1;
inline constexpr uint32_t kPlacementGranule = 2u << 20;  // one page sampled per 2 MiB (5.4)

struct PlacementRun {
  int32_t node = -1;  // -1: not resident / unknown
  uint64_t bytes = 0;
  bool operator==(const PlacementRun&) const = default;
};

struct RegionPlacement {
  int32_t id = 0;
  uint64_t bytes = 0;
  std::vector<PlacementRun> runs;  // cover [0, bytes) in order
  bool operator==(const RegionPlacement&) const = default;
};

inline constexpr int32_t kCheckpointingThread = -1;

struct ThreadAffinity {
  int32_t index = kCheckpointingThread;  // or the index the application registered
  std::vector<int> cpus;                 // ascending
  bool operator==(const ThreadAffinity&) const = default;
};

struct Placement {
  int64_t number = 0;
  int64_t data_created_ns = 0;
  uint32_t node_count = 1;
  uint32_t cpu_count = 1;
  uint32_t granule_bytes = kPlacementGranule;
  std::vector<RegionPlacement> regions;
  std::vector<ThreadAffinity> threads;
  bool operator==(const Placement&) const = default;

  const RegionPlacement* region(int32_t id) const;
  const ThreadAffinity* thread(int32_t index) const;
};

// Appends a run, merging with the previous one when the node is the same.
void AppendRun(std::vector<PlacementRun>* runs, int32_t node, uint64_t bytes);

std::string EncodePlacement(const Placement& p);
// Checks 5.3 except the match with the data file. kCorrupt names what is
// wrong; kUnsupported for an unknown record_version.
Result<Placement> DecodePlacement(std::string_view bytes);

// "<dir>/<name>/v<20 digits>.placement".
std::string PlacementPath(const std::string& dir, std::string_view name, int64_t number);
// Temp file + rename, no fsync (5.1).
Status WritePlacement(os::FileSystem* fs, const std::string& path, const Placement& p);
// Reads and checks a record for version `number` whose data file has
// `data_created_ns`: kNotFound when there is none, kCorrupt / kUnsupported /
// kState ("belongs to an earlier file") otherwise; messages name the path.
Result<Placement> ReadPlacement(os::FileSystem* fs, const std::string& path, int64_t number,
                                int64_t data_created_ns);
// The record beside a checkpoint's data file ("v<N>.cairn" -> "v<N>.placement").
std::string PlacementPathOf(const std::string& data_path);
// Opens the data file at `data_path` (its checks of 2.5/4.6) for its
// created_unix_ns, then reads the record beside it.
Result<Placement> ReadPlacementOf(os::FileSystem* fs, const std::string& data_path);
// Copies the record beside `from_data` to beside `to_data`, if there is one
// (best effort, no error).
void CopyPlacement(os::FileSystem* fs, const std::string& from_data, const std::string& to_data);

}  // namespace cairn::format
