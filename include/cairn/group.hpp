// Cairn: the processes of a parallel job, as the core library sees them.
//
// libcairn knows nothing of MPI. A client opened in a Group (Client::Open
// below) makes Latest, RestoreLatest, Restore and Wait collective over the
// group's members (docs/mpi.md): the core only needs element-wise reductions
// of integers, which libcairn_mpi implements with MPI_Allreduce on a
// communicator of its own. Every member must make the same collective calls in
// the same order, as with MPI collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "cairn/cairn.h"
#include "cairn/cairn.hpp"
#include "cairn/export.h"
#include "cairn/status.hpp"

namespace cairn {

class CAIRN_EXPORT Group {
 public:
  enum class Op { kMin, kMax };
  virtual ~Group();
  virtual int rank() const = 0;  // 0 .. size() - 1
  virtual int size() const = 0;
  // This member's node, numbered 0 .. nodes - 1 (from MPI_COMM_TYPE_SHARED,
  // or rank / k with CAIRN_MPI_RANKS_PER_NODE=k).
  virtual int node() const = 0;
  // True when node() is simulated (CAIRN_MPI_RANKS_PER_NODE): each node then
  // gets its own local directory, <scratch>/node<n> (docs/format.md, 3.5).
  virtual bool simulated_nodes() const = 0;
  // k of CAIRN_MPI_RANKS_PER_NODE=k; 0 when the nodes are real.
  virtual int ranks_per_node() const = 0;
  // Element-wise reduction of values[0..n) over all members, in place.
  // Collective. An error (the transport's) is the same kind on every member
  // only as far as the transport guarantees it.
  virtual Status AllReduce(Op op, int64_t* values, size_t n) = 0;

  // Point-to-point (the redundancy levels: partner copies, docs/mpi.md).
  // Sends each of `sends` to its member and receives one message from each
  // member of `from`, in that order, into (*received)[i]. The members that
  // take part call it together with matching patterns (what member a sends
  // to b, b expects from a); at most one message per pair and call. Sends
  // do not wait for the receiver, so any pattern completes. Not a barrier.
  struct Outgoing {
    int to = -1;
    const uint8_t* data = nullptr;
    size_t bytes = 0;
  };
  virtual Status Exchange(const std::vector<Outgoing>& sends, const std::vector<int>& from,
                          std::vector<std::vector<uint8_t>>* received) = 0;
};

// Opens a client on every member of `group` (collective): `config` is each
// member's own loaded configuration, or the error loading it gave. The
// members first agree that every one of them loaded a configuration and that
// the keys that must agree (docs/mpi.md) do; otherwise every member returns
// kConfig naming the failing rank or the differing keys. Then each opens its
// client in its own directories (docs/format.md, 3.5); a member that fails
// makes all fail.
CAIRN_EXPORT Result<std::unique_ptr<Client>> OpenInGroup(Result<Config> config,
                                                         std::unique_ptr<Group> group);

// For libraries built on the C API (libcairn_mpi): hand a client to C as a
// cairn_client_t (owned by the caller, freed by cairn_close), find it again,
// and report a
// Status as a C call does (returns its code; cairn_last_error() gives its
// message).
CAIRN_EXPORT cairn_client_t* ToCHandle(std::unique_ptr<Client> client);
// The Client of a C handle (still owned by the handle); nullptr for NULL.
CAIRN_EXPORT Client* FromCHandle(cairn_client_t* c);
CAIRN_EXPORT int ReportToC(const Status& status);

}  // namespace cairn
