// Reading the files of a saved MPI job from a job of another size (or any
// process): docs/format.md 3.7 is the procedure, docs/mpi.md the API. MPI-free
// and local: the collective checks on top of it are in client_group.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cairn/config.hpp"
#include "cairn/status.hpp"

namespace cairn::saved {

// The saved job's shape, from its rank 0's manifest (3.7, step 1).
struct Shape {
  int ranks = 0;           // N
  int ranks_per_node = 0;  // k; 0 = real nodes
};

// `root` is the reader's configuration before any rank subdirectory is added
// (the same storage roots as the saved job's). kNotFound when no manifest of
// rank 0 is readable, naming the places tried.
Result<Shape> FindShape(const Config& root, const std::string& name);

// Saved rank `rank`'s version `version`: the bytes of region `region` and
// where they are served from. kInvalidArgument for a rank outside
// 0 .. ranks-1; kNotFound when no directory serves the version (naming why:
// no file, not globally committed there); kCorrupt / kIo from the read.
Result<uint64_t> RegionSize(const Config& root, const Shape& shape, const std::string& name,
                            int64_t version, int rank, int32_t region);
// Copies bytes [offset, offset + bytes) of that region into host memory dst,
// every block verified; kInvalidArgument for a region id not in the version
// or a range past its end (naming the region's size).
Status ReadRegion(const Config& root, const Shape& shape, const std::string& name, int64_t version,
                  int rank, int32_t region, uint64_t offset, void* dst, size_t bytes);
// Whether some directory of the rank serves the version (structure checked,
// no data read); the Status says why not.
Status Serves(const Config& root, const Shape& shape, const std::string& name, int64_t version,
              int rank);
// The versions some directory of the rank serves, newest first.
Result<std::vector<int64_t>> ServedVersions(const Config& root, const Shape& shape,
                                            const std::string& name, int rank);

}  // namespace cairn::saved
