// A group of one process: what a client opened without MPI uses where the
// collective code needs a Group (the saved-job checks), and what tests use to
// run the group paths in one process. Internal.
#pragma once

#include <cstdint>
#include <vector>

#include "cairn/group.hpp"
#include "cairn/status.hpp"

namespace cairn {

class SoloGroup final : public Group {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int node() const override { return 0; }
  bool simulated_nodes() const override { return false; }
  int ranks_per_node() const override { return 0; }
  Status AllReduce(Op, int64_t*, size_t) override { return Status::Ok(); }
  Status Exchange(const std::vector<Outgoing>& sends, const std::vector<int>& from,
                  std::vector<std::vector<uint8_t>>* received) override {
    if (!sends.empty() || !from.empty())
      return Status::Internal("a group of one has no partner to exchange with");
    received->clear();
    return Status::Ok();
  }
};

}  // namespace cairn
