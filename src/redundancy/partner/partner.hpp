// L2 partner copies (docs/mpi.md "Partner copies (L2)"; docs/format.md 3.8):
// each rank's committed file is also kept by a rank on another node, and a
// rank that lost its file (a lost node) gets it back from there. MPI-free:
// the messages go through Group::Exchange, at collective calls only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "redundancy/redundancy.hpp"
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

// <rank dir>/.partner/rank<s>: where a holder keeps source s's copies (under
// <name>/, as in a tier; a name never starts with a dot). `c` is the
// holder's own configuration (RankConfig).
std::string CopyDir(const Config& c, int source);

// Member i of node n (members in rank order) has as partner member
// i mod |node n+1| of node (n+1) mod nodes. Collective (one reduction of a
// vector of group.size() integers). kConfig when the group has one node.
Result<Map> MakeMap(Group& group);
// The partner map from every member's node (for tests).
Map MapFromNodes(const std::vector<int>& node_of, int rank);

// Sends this member's committed file (all links of its chain) of `version` to
// its partner and stores the copies its sources send (temp + fsync + rename
// + directory fsync), keeping the newest config.keep_versions per source.
// `config` is the member's own (RankConfig). Collective over the group; the
// outcome is not agreed here.
Status Replicate(Group& group, const Map& map, const Config& config, const std::string& name,
                 int64_t version);

// The partner level of redundancy::Recover: offers the versions the
// member's partner holds; fetches the partner's copy. `refill` false: no
// copy is sent again (Refill does nothing, Older offers none): an older
// version's recovery, whose copies the background transfers send again.
std::unique_ptr<redundancy::Level> MakeLevel(Group& group, const Map& map, const Config& config,
                                             bool refill = true);

}  // namespace cairn::partner
