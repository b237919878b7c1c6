// The collective side of a client opened in a Group (docs/mpi.md): agreeing
// on errors, configurations and versions with integer reductions only, and
// the global manifest (docs/format.md, 3.6; manifest.hpp). MPI-free: libcairn_mpi supplies
// the Group.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "redundancy/manifest.hpp"
#include "cairn/config.hpp"
#include "cairn/group.hpp"
#include "cairn/status.hpp"

namespace cairn::os {
class FileSystem;
}

namespace cairn::collective {

// A stable non-negative 63-bit digest of a text (a configuration value, a
// name), equal on every member for equal texts.
int64_t Digest(std::string_view text);

// Every member passes its own outcome of a step; all return OK only if every
// member's was OK. A failed member returns its own status (with `what` as
// context), the others an error of the same code naming the lowest failed
// rank. Collective.
Status Agree(Group& group, const Status& local, std::string_view what);

// The keys that must agree on every rank (docs/mpi.md): kConfig on every
// member, naming each key that differs, when some do. Collective.
Status CheckConfigsAgree(Group& group, const Config& config);

// The member's own directories (docs/format.md, 3.5).
Config RankConfig(const Config& config, const Group& group);

// Newest version <= bound present in every member's `descending` list (its
// candidates, newest first); -1 when there is none. Collective.
Result<int64_t> NewestCommon(Group& group, const std::vector<int64_t>& descending, int64_t bound);

}  // namespace cairn::collective
