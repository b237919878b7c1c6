// L3 XOR parity (docs/mpi.md "XOR parity (L3)"; docs/format.md 3.9 is
// normative): the ranks are grouped in sets on distinct nodes; each member
// keeps one parity chunk of the set's versions, so that a set rebuilds any
// one lost member. MPI-free: the messages go through Group::Exchange, at
// collective calls only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cairn/config.hpp"
#include "cairn/group.hpp"
#include "cairn/status.hpp"
#include "redundancy/checkpoints.hpp"
#include "redundancy/parity/stripes.hpp"
#include "redundancy/redundancy.hpp"

namespace cairn {
struct MpiStats;  // cairn/cairn.hpp
}

namespace cairn::parity {

// Every parity set of the job (members in node order), this member's, and
// the sets' code.
struct Sets {
  std::vector<std::vector<int>> all;
  int mine = -1;      // index in `all`
  int position = -1;  // this member's position in all[mine]
  L3Code code = L3Code::kXor;
  size_t parity = 1;  // e: the lost members a set rebuilds
  const std::vector<int>& members() const { return all[static_cast<size_t>(mine)]; }
  impl::Stripes stripes() const { return {.m = members().size(), .e = parity}; }
};

// The sets of docs/format.md 3.9 from every member's node; `group_size` = g
// (0: min(4, nodes)), `parity` = e (0: 1 for XOR, 2 for RS). kConfig naming
// why when g <= e, g > nodes, a set would have e members or fewer, or RS
// without ISA-L.
Result<Sets> SetsFromNodes(const std::vector<int>& node_of, int rank, int64_t group_size,
                           L3Code code = L3Code::kXor, int64_t parity = 0);
// The same from the group (one reduction of group.size() integers). Collective.
Result<Sets> MakeSets(Group& group, int64_t group_size, L3Code code = L3Code::kXor,
                      int64_t parity = 0);

// Back-pressure for an encoding in the background (docs/mpi.md,
// "Back-pressure"): Pause() runs before each window the member reads,
// sends and writes, and returns once it may go on.
class Pauser {
 public:
  virtual void Pause() = 0;

 protected:
  ~Pauser() = default;
};

// Computes and stores this member's parity chunk of `version` (its bundle
// in config.scratch_dir) with its set; returns the parity file's size, or 0
// on every member when the set skipped the version: its files are gone from
// a member's local directory and that member committed a newer version of
// `name` (retention removed it before its turn: an encoding that fell
// behind). Collective over the set (every member of the group calls it);
// the outcome is not agreed here. `pause` (may be null): asked before each
// window. `cache` (may be null): the member's checkpoints, whose host cache
// serves the windows of its own bundle that it still holds (the rest is
// read from the files).
Result<uint64_t> Encode(Group& group, const Sets& sets, const Config& config,
                        const std::string& name, int64_t version, Pauser* pause = nullptr,
                        redundancy::Checkpoints* cache = nullptr);

// The parity level of redundancy::Recover: offers the versions the member's
// set can rebuild for it (it alone lacks them and every other member has
// them and its parity); rebuilds them. Notes name the sets that lost two
// members (they cannot rebuild). The phases of its rebuilds are added to
// *times (the l3_*_s of MpiStats; docs/mpi.md "Measuring a rebuild").
std::unique_ptr<redundancy::Level> MakeLevel(Group& group, const Sets& sets, const Config& config,
                                             MpiStats* times);

}  // namespace cairn::parity
