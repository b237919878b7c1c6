// L2 partner copies (docs/mpi.md "Partner copies (L2)"; docs/format.md 3.8):
// each rank's committed file is also kept by a rank on another node, and a
// rank that lost its file (a lost node) gets it back from there. MPI-free:
// the messages go through Group::Exchange, at collective calls only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cairn/config.hpp"
#include "cairn/group.hpp"
#include "cairn/status.hpp"

namespace cairn::partner {

// Who keeps whose copies: this member's partner (the holder of its copies)
// and the members whose copies it holds.
struct Map {
  int partner = -1;
  std::vector<int> sources;
};

// Member i of node n (members in rank order) has as partner member
// i mod |node n+1| of node (n+1) mod nodes. Collective (one reduction of a
// vector of group.size() integers). kConfig when the group has one node.
Result<Map> MakeMap(Group& group);
// The partner map from every member's node (for tests).
Map MapFromNodes(const std::vector<int>& node_of, int rank);

// CAIRN_L2_EVERY: 0 (unset) = off; kConfig naming the value when it is not a
// whole number >= 0.
Result<int64_t> EveryFromEnvironment();

// Sends this member's committed file (all links of its chain) of `version` to
// its partner and stores the copies its sources send (temp + fsync + rename
// + directory fsync), keeping the newest config.keep_versions per source.
// `config` is the member's own (RankConfig). Collective over the group; the
// outcome is not agreed here.
Status Replicate(Group& group, const Map& map, const Config& config, const std::string& name,
                 int64_t version);

// Before a collective latest / restore: the newest version v (<= bound) that
// every member has locally or in its partner's copies; each member that
// lacks v locally (or whose local copy is in `distrust`) gets the partner's
// copy written into its local directory. Returns v (-1 when there is none).
// `intact` lists the member's own versions whose local or persistent copy
// checks out, newest first. *served says how (empty: nothing fetched).
// Collective.
Result<int64_t> Recover(Group& group, const Map& map, const Config& config, const std::string& name,
                        const std::vector<int64_t>& intact, int64_t bound, int64_t distrust,
                        std::string* served);

}  // namespace cairn::partner
