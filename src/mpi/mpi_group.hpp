// libcairn_mpi inside: the communicator as a cairn::Group (mpi_client.cpp),
// for the C form of the group (group_c.cpp).
#pragma once

#include <memory>

#include "cairn/cairn_mpi.h"
#include "cairn/group.hpp"

namespace cairn {

// Collective over comm (duplicated). Errors that every rank sees alike (MPI's)
// are returned; a CAIRN_MPI_RANKS_PER_NODE problem goes to *setup, for the
// ranks to agree on when they open (OpenInGroup's config check).
Result<std::unique_ptr<Group>> NewMpiGroup(MPI_Comm comm, Status* setup);

}  // namespace cairn
