// cairn-bench-mpi's phases (docs/bench.md, "MPI: cairn-bench-mpi"). Each is
// collective over MPI_COMM_WORLD: it starts at a barrier, so the ranks run it
// at the same time and share the machine's memory bandwidth and cores as a
// job's ranks do, and returns this rank's own figures; main() reduces them.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "cairn/cairn.hpp"
#include "cairn/status.hpp"

namespace cairn::bench {

// This rank's copy of n bytes src -> dst (both touched beforehand): seconds.
double MemcpyPhase(uint8_t* dst, const uint8_t* src, size_t n);

struct CaptureFigures {
  double blocking_s = 0;         // inside Client::Checkpoint
  int64_t local_commit_ns = -1;  // this rank's local commit of the version (CLOCK_REALTIME)
  int64_t record_ns = -1;        // its manifest's record of the global commit (CLOCK_REALTIME)
  int64_t learned_ns = -1;       // when it learned the global commit (before writing it)
};
// Checkpoints `version` of "bench" (the protected buffer), then makes Cairn
// calls every poll_us microseconds (an application computing between them)
// until its manifest records the version globally committed.
Result<CaptureFigures> CapturePhase(Client& client, int64_t version, uint64_t poll_us);

// The synchronous baseline: writes n bytes to `path` (replacing it), fsyncs
// it when `fsync`, then MPI_Barrier; seconds from start to the barrier's end
// (the time the application is blocked).
Result<double> SyncPhase(const std::string& path, const uint8_t* data, size_t n, bool fsync);

// The run's directory, the same on every rank (collective): `dir` (made if
// missing), or a fresh one named <stem>.XXXXXX under $TMPDIR when `dir` is
// empty; "" when it could not be made (rank 0 says so).
std::string RunDir(const std::string& dir, const char* stem);
// Rank 0 prints the report and writes it to `json_path` (unless empty).
void Publish(const std::string& text, const std::string& json_path);
// After a barrier, rank 0 removes the run's directory when it made it.
void RemoveRunDir(const std::string& root, bool made);

}  // namespace cairn::bench
