// Cairn: the processes of a parallel job, as the core library sees them.
//
// libcairn knows nothing of MPI. A client opened in a Group (Client::Open
// below) makes Latest, RestoreLatest, Restore and Wait collective over the
// group's members (docs/mpi.md): the core only needs element-wise reductions
// of integers, which libcairn_mpi implements with MPI_Allreduce (and
// MPI_Iallreduce, for the global commit learned in the background) on
// communicators of its own. Every member must make the same collective calls in
// the same order, as with MPI collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
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

  // A nonblocking reduction (the global commit learned in the background,
  // docs/mpi.md). StartAllReduce starts an element-wise reduction of a copy
  // of values[0..n) over all members and returns at once; Test() says,
  // without blocking, whether it is done (then values() is the result);
  // Wait() blocks until it is done, which needs every member to have started
  // it. Contract:
  //   - These reductions run on a channel of their own (libcairn_mpi: a
  //     second duplicate of the communicator), so AllReduce and Exchange may
  //     be called while one is outstanding, on any member, in any order.
  //   - Among themselves they match by sequence: the k-th StartAllReduce of
  //     each member is reduced with the k-th of every other one, whenever
  //     each member calls it (members need not start them at the same call).
  //   - Start, Test and Wait are called from one thread at a time, the
  //     thread that may make MPI calls (MPI_THREAD_FUNNELED suffices).
  //   - A Pending must be complete (Test() true or Wait() returned) before it
  //     is destroyed: MPI cannot cancel a collective.
  //   - Optional: a Group whose nonblocking() is false (the default, e.g. a
  //     binding's group over the C API) has none; its clients learn the
  //     global commit at the collective calls only, and close stays local.
  class CAIRN_EXPORT Pending {
   public:
    virtual ~Pending();
    virtual Result<bool> Test() = 0;
    virtual Status Wait() = 0;
    // The result; valid once Test() returned true or Wait() OK.
    virtual const std::vector<int64_t>& values() const = 0;
  };
  virtual bool nonblocking() const { return false; }
  virtual Result<std::unique_ptr<Pending>> StartAllReduce(Op op, const int64_t* values, size_t n);

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

  // Nonblocking point-to-point (the partner copies in the background,
  // docs/mpi.md), on a channel of its own (libcairn_mpi: a third duplicate of
  // the communicator): nothing sent here matches AllReduce, Exchange or the
  // nonblocking reductions. Messages from one member to another on one tag
  // arrive in the order they were started, and the receives a member starts
  // for one (from, tag) are matched in the order it started them. Same
  // thread rules as the nonblocking reductions. A Request must be complete
  // (Test() true) or cancelled before it is destroyed; the buffer it was
  // given must live until then. Optional: point_to_point() false (the
  // default) has none, and the partner copies then ride on the collective
  // wait (Exchange).
  class CAIRN_EXPORT Request {
   public:
    virtual ~Request();
    // Done? Once true, bytes() is the size of the message (a receive).
    virtual Result<bool> Test() = 0;
    virtual size_t bytes() const = 0;
    // Withdraws a receive: once it returns Ok the request is complete
    // (withdrawn, or a message matched it meanwhile) and its buffer may go;
    // after an error it may still be pending and the buffer must stay. A
    // send cannot be withdrawn (an error): its owner keeps it until Test().
    virtual Status Cancel() = 0;
  };
  virtual bool point_to_point() const { return false; }

  // Whether the nonblocking calls above (StartAllReduce, Pending::Test and
  // Wait, StartSend, StartReceive, Request::Test and Cancel) may be made on
  // a thread of Cairn's own while the application's threads make their own
  // calls on the transport, AllReduce and Exchange included (libcairn_mpi:
  // the application initialised MPI with MPI_THREAD_MULTIPLE). Then a
  // client opened in the group progresses the global commit and the
  // partner copies on its own thread (mpi.progress_thread, docs/mpi.md
  // "Progress"); Cairn still makes one such call at a time per object.
  // The default, false, keeps every call on the opening thread.
  virtual bool thread_multiple() const { return false; }

  // A second group of the same members (ranks, nodes) on channels of its
  // own (libcairn_mpi: duplicates of the communicator), so that one thread
  // may make collective calls on it while another makes them on this one
  // (with thread_multiple()). Collective. Optional: the default is
  // kUnsupported, and the L3 parity is then encoded inside the waits.
  virtual Result<std::unique_ptr<Group>> Duplicate();
  virtual Result<std::unique_ptr<Request>> StartSend(int to, int tag, const uint8_t* data,
                                                     size_t bytes);
  // Receives one message of at most `capacity` bytes (a longer one is an
  // error) from member `from` with `tag`.
  virtual Result<std::unique_ptr<Request>> StartReceive(int from, int tag, uint8_t* data,
                                                        size_t capacity);
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

// The global commit of `name` as this member knows it (docs/mpi.md, "The
// global commit in the background"). Times are CLOCK_REALTIME in ns since the
// epoch (comparable across the ranks of one machine only); -1 = none yet.
struct GlobalCommitState {
  int64_t local_version = -1;    // newest version committed in this member's local directory
  int64_t local_commit_ns = -1;  // when that commit (the rename) completed
  int64_t global_version = -1;   // newest globally committed version recorded in its manifest
  int64_t global_record_ns = -1; // when that record (the manifest's rename) completed
  int64_t global_learned_ns = -1;  // when this member learned it (the round's end), before the write
  uint64_t rounds = 0;           // background reductions completed so far (any name)
  // The redundancy levels (docs/mpi.md): the newest version of the name
  // whose partner copy (L2) this member's partner stored, and whose parity
  // (L3) its set stored, with when this member learned it (realtime ns);
  // -1: none, or the level is off.
  int64_t l2_version = -1;
  int64_t l2_protected_ns = -1;
  int64_t l3_version = -1;
  int64_t l3_protected_ns = -1;
};

// The redundancy levels that one collective wait adds (docs/mpi.md), for
// callers whose checkpoint call names its level (FTI's FTI_Checkpoint(id,
// level), docs/fti.md) rather than counting checkpoints (L2) or waits (L3,
// L4) as the mpi.l*_every keys do.
struct WaitLevels {
  bool l2 = false;          // partner copy
  bool l3 = false;          // XOR parity
  bool persistent = false;  // wait for the persistent copy and record it (L4)
};

// Collective: Client::Wait at kLocal (kPersistent when levels.persistent),
// then exactly the levels asked, whatever the CAIRN_L*_EVERY counters say;
// this wait is not counted by them. A level asked that the client did not set
// up at open (mpi.l2_every / mpi.l3_every, CAIRN_L2_EVERY / CAIRN_L3_EVERY, 0) is kConfig, on every
// rank (the ranks make the same call). For a client in no group: kState.
CAIRN_EXPORT Status WaitAtLevels(Client& client, std::string_view name, int64_t version,
                                 WaitLevels levels);

// Progresses the background reduction like any Cairn call on the opening
// thread (tests it, records its result, starts the next; never blocks) and
// returns the state of `name`. For a client in no group: kState.
CAIRN_EXPORT Result<GlobalCommitState> ProgressGlobalCommit(Client& client, std::string_view name);

// For the drop-in APIs (VELOC_Cleanup, docs/veloc.md): waits until every
// version of checkpoint `name` in the client's pipeline has reached its last
// tier (committed locally, and persisted where it is) or failed, then deletes
// the local (scratch) file of every committed version of `name`, in the
// background after the copies queued before. The persistent copies stay: a
// later restore reads them. Local to this process (no collective call).
// kUnsupported when checkpoint.changes is not full (a later layer would rest
// on a deleted base); kState when the client is closed.
CAIRN_EXPORT Status RemoveLocalCopies(Client& client, std::string_view name);

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
