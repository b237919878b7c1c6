// libcairn_mpi inside: the communicator as a cairn::Group (mpi_client.cpp),
// for the C form of the group (group_c.cpp).
#pragma once

#include <memory>

#include "cairn/cairn_mpi.h"
#include "cairn/group.hpp"

namespace cairn {

// Collective over comm (duplicated); ranks_per_node: mpi.ranks_per_node (0 =
// the real nodes; < 0: the caller's configuration did not load). Errors
// that every rank sees alike (MPI's) are returned; ranks that disagree on
// ranks_per_node get *setup, for the ranks to agree on when they open
// (OpenInGroup's config check).
Result<std::unique_ptr<Group>> NewMpiGroup(MPI_Comm comm, int ranks_per_node, Status* setup);

}  // namespace cairn
