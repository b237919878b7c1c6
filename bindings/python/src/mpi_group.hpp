// cairn.Client(comm=...) (docs/python.md, docs/mpi.md): a client of this
// extension's own core, opened in the group of an MPI communicator.
#pragma once

#include <memory>
#include <string>

#include "cairn/cairn.hpp"
#include "cairn/config.hpp"

namespace cairn_py {

// Collective over the communicator whose Fortran handle is fcomm (mpi4py's
// Comm.py2f()). `library` is libcairn_mpi's path or soname: it is loaded at
// run time, so the extension itself links neither MPI nor libcairn_mpi.
// `config` is this rank's configuration or the error loading it gave (the
// ranks agree on it, so that a bad one fails every rank instead of a hang).
cairn::Result<std::unique_ptr<cairn::Client>> OpenMpiClient(cairn::Result<cairn::Config> config,
                                                            int fcomm, const std::string& library);

}  // namespace cairn_py
