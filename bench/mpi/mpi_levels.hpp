// cairn-bench-mpi --levels (docs/bench.md, "MPI: the redundancy levels"):
// the application's blocking with the redundancy levels on against L1
// alone, in one run, interleaved, and how long each level takes to protect
// a version while the application computes without calling Cairn.
#pragma once

#include <cstdint>
#include <string>

#include "cairn/config.hpp"

namespace cairn::bench {

struct LevelsOptions {
  uint64_t size = 64ull << 20;  // per rank
  uint64_t checkpoints = 8;     // per configuration
  double interval_s = 0;        // compute between checkpoints; 0 = chosen from the warm-up
  bool l2 = false, l3 = false;  // --levels L1,L2[,L3]
  L3Code l3_code = L3Code::kXor;  // --l3-code (mpi.l3_code)
  int l3_parity = 0;              // --l3-parity (mpi.l3_parity; 0: the code's default)
  std::string json_path;
  std::string dir;  // empty: a fresh temporary directory, removed at the end
};

// Runs the comparison on every rank of MPI_COMM_WORLD; rank 0 prints (and
// writes) the JSON report. 0 on success.
int RunLevels(const LevelsOptions& o, int rank, int size, const std::string& command);

}  // namespace cairn::bench
