// libcairn_mpi: the MPI communicator as a cairn::Group (cairn/group.hpp), and
// cairn_open_mpi / cairn::OpenMpi on top of it (docs/mpi.md). Everything
// collective lives in libcairn (redundancy/collective.cpp); this file only turns
// reductions into MPI_Allreduce / MPI_Iallreduce and finds the node of each
// rank.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "cairn/cairn_mpi.h"
#include "cairn/group.hpp"
#include "mpi_group.hpp"

namespace cairn {

namespace {

Status MpiError(int err, const std::string& what) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(err, text, &len) != MPI_SUCCESS) len = 0;
  return Status::Io(what + " failed: " + std::string(text, static_cast<size_t>(len)));
}

bool Finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

Status AfterFinalize() {
  return Status::State("MPI is finalized: close the Cairn client before MPI_Finalize");
}

// One MPI_Iallreduce in flight (Group::Pending). Its buffer lives here, so
// the object must outlive the request (group.hpp's contract).
class MpiPending final : public Group::Pending {
 public:
  MpiPending(const int64_t* values, size_t n) : values_(values, values + n) {}
  Status Begin(MPI_Op op, MPI_Comm comm) {
    int err = MPI_Iallreduce(MPI_IN_PLACE, values_.data(), static_cast<int>(values_.size()),
                             MPI_INT64_T, op, comm, &request_);
    return err == MPI_SUCCESS ? Status::Ok() : MpiError(err, "MPI_Iallreduce");
  }
  Result<bool> Test() override {
    if (done_) return true;
    if (Finalized()) return AfterFinalize();
    int flag = 0;
    int err = MPI_Test(&request_, &flag, MPI_STATUS_IGNORE);
    if (err != MPI_SUCCESS) return MpiError(err, "MPI_Test");
    done_ = flag != 0;
    return done_;
  }
  Status Wait() override {
    if (done_) return Status::Ok();
    if (Finalized()) return AfterFinalize();
    int err = MPI_Wait(&request_, MPI_STATUS_IGNORE);
    if (err != MPI_SUCCESS) return MpiError(err, "MPI_Wait");
    done_ = true;
    return Status::Ok();
  }
  const std::vector<int64_t>& values() const override { return values_; }

 private:
  std::vector<int64_t> values_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  bool done_ = false;
};

// One MPI_Isend or MPI_Irecv (Group::Request). Its owner keeps it, and the
// buffer it was given, until Test() says it is done or Cancel() withdrew it
// (group.hpp): MPI reads a send's buffer, and writes a receive's, until
// then. A receive destroyed before that is cancelled here (MPI_Cancel +
// MPI_Wait) as a last resort. A send destroyed before that is a bug of the
// owner: it is NOT handed to MPI_Request_free (that lets MPI go on reading
// a buffer the owner is about to free, the heap corruption the L2 tests
// once met in MPI_Finalize); the request is left as it is.
class MpiRequest final : public Group::Request {
 public:
  explicit MpiRequest(bool receive) : receive_(receive) {}
  ~MpiRequest() override {
    if (done_ || request_ == MPI_REQUEST_NULL || Finalized()) return;
    if (receive_) (void)Cancel();
  }
  MPI_Request* request() { return &request_; }
  Result<bool> Test() override {
    if (done_) return true;
    if (Finalized()) return AfterFinalize();
    int flag = 0;
    MPI_Status status;
    int err = MPI_Test(&request_, &flag, &status);
    if (err != MPI_SUCCESS) return MpiError(err, receive_ ? "MPI_Test of a receive" : "MPI_Test of a send");
    if (flag == 0) return false;
    done_ = true;
    if (receive_) {
      int count = 0;
      MPI_Get_count(&status, MPI_BYTE, &count);
      bytes_ = count > 0 ? static_cast<size_t>(count) : 0;
    }
    return true;
  }
  size_t bytes() const override { return bytes_; }
  Status Cancel() override {
    if (done_) return Status::Ok();
    if (Finalized()) return AfterFinalize();
    if (!receive_) return Status::Unsupported("a send is never withdrawn: its owner waits for it to complete");
    int err = MPI_Cancel(&request_);
    if (err != MPI_SUCCESS) return MpiError(err, "MPI_Cancel of a receive");
    // Cancelled, or matched meanwhile: either way it completes, and only
    // then may its buffer go.
    err = MPI_Wait(&request_, MPI_STATUS_IGNORE);
    if (err != MPI_SUCCESS) return MpiError(err, "MPI_Wait for a cancelled receive");
    done_ = true;
    return Status::Ok();
  }

 private:
  const bool receive_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  bool done_ = false;
  size_t bytes_ = 0;
};

class MpiGroup final : public Group {
 public:
  ~MpiGroup() override {
    if (Finalized()) return;
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
    if (background_ != MPI_COMM_NULL) MPI_Comm_free(&background_);
    if (transfers_ != MPI_COMM_NULL) MPI_Comm_free(&transfers_);
  }

  // Collective over comm. `ranks_per_node`: mpi.ranks_per_node of this
  // rank's configuration (0 = real nodes; < 0: it did not load). Errors that
  // every rank sees alike (MPI itself) are returned; ranks that disagree on
  // ranks_per_node get *setup, so that they still agree on it through the
  // group.
  static Result<std::unique_ptr<MpiGroup>> Create(MPI_Comm comm, int ranks_per_node, Status* setup) {
    auto g = std::unique_ptr<MpiGroup>(new MpiGroup);
    int err = MPI_Comm_dup(comm, &g->comm_);
    if (err != MPI_SUCCESS) return MpiError(err, "MPI_Comm_dup");
    MPI_Comm_set_errhandler(g->comm_, MPI_ERRORS_RETURN);
    // The nonblocking reductions' own communicator: collectives match in
    // issue order per communicator, and the background rounds start at
    // different calls on different ranks, so they must never share one
    // with AllReduce (docs/mpi.md).
    err = MPI_Comm_dup(comm, &g->background_);
    if (err != MPI_SUCCESS) return MpiError(err, "MPI_Comm_dup");
    MPI_Comm_set_errhandler(g->background_, MPI_ERRORS_RETURN);
    // The background point-to-point messages' own (StartSend/StartReceive).
    err = MPI_Comm_dup(comm, &g->transfers_);
    if (err != MPI_SUCCESS) return MpiError(err, "MPI_Comm_dup");
    MPI_Comm_set_errhandler(g->transfers_, MPI_ERRORS_RETURN);
    int provided = MPI_THREAD_SINGLE;
    if (MPI_Query_thread(&provided) == MPI_SUCCESS)
      g->thread_multiple_ = provided == MPI_THREAD_MULTIPLE;
    MPI_Comm_rank(g->comm_, &g->rank_);
    MPI_Comm_size(g->comm_, &g->size_);
    CAIRN_RETURN_IF_ERROR(g->FindNode());
    *setup = g->SimulateNodes(ranks_per_node);
    return g;
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int node() const override { return node_; }
  bool simulated_nodes() const override { return simulated_; }
  int ranks_per_node() const override { return ranks_per_node_; }

  // Each message: its size (int64), then its bytes in pieces of at most
  // 1 GiB (MPI counts are int). Messages between two ranks do not overtake
  // each other, so one tag serves every call.
  Status Exchange(const std::vector<Outgoing>& sends, const std::vector<int>& from,
                  std::vector<std::vector<uint8_t>>* received) override {
    constexpr size_t kPiece = size_t{1} << 30;
    constexpr int kTag = 0x2ca1;
    std::vector<int64_t> sizes(sends.size());
    std::vector<MPI_Request> requests;
    int err = MPI_SUCCESS;
    for (size_t i = 0; i < sends.size() && err == MPI_SUCCESS; ++i) {
      sizes[i] = static_cast<int64_t>(sends[i].bytes);
      requests.push_back(MPI_REQUEST_NULL);
      err = MPI_Isend(&sizes[i], 1, MPI_INT64_T, sends[i].to, kTag, comm_, &requests.back());
      for (size_t at = 0; at < sends[i].bytes && err == MPI_SUCCESS; at += kPiece) {
        requests.push_back(MPI_REQUEST_NULL);
        err = MPI_Isend(sends[i].data + at, static_cast<int>(std::min(kPiece, sends[i].bytes - at)),
                        MPI_BYTE, sends[i].to, kTag, comm_, &requests.back());
      }
    }
    // The caller's buffers are reused: a caller that exchanges windows of
    // the same size round after round (L3's streamed rebuild) pays no
    // allocation nor zero-fill per round, only the copy MPI makes.
    received->resize(from.size());
    for (size_t i = 0; i < from.size() && err == MPI_SUCCESS; ++i) {
      int64_t size = 0;
      err = MPI_Recv(&size, 1, MPI_INT64_T, from[i], kTag, comm_, MPI_STATUS_IGNORE);
      if (err != MPI_SUCCESS) break;
      (*received)[i].resize(static_cast<size_t>(size));
      for (size_t at = 0; at < (*received)[i].size() && err == MPI_SUCCESS; at += kPiece) {
        err = MPI_Recv((*received)[i].data() + at,
                       static_cast<int>(std::min(kPiece, (*received)[i].size() - at)), MPI_BYTE,
                       from[i], kTag, comm_, MPI_STATUS_IGNORE);
      }
    }
    const int wait =
        MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
    if (err == MPI_SUCCESS) err = wait;
    return err == MPI_SUCCESS ? Status::Ok()
                              : MpiError(err, "exchanging messages with the partner ranks");
  }

  bool nonblocking() const override { return true; }
  Result<std::unique_ptr<Pending>> StartAllReduce(Op op, const int64_t* values,
                                                  size_t n) override {
    if (Finalized()) return AfterFinalize();
    auto p = std::make_unique<MpiPending>(values, n);
    CAIRN_RETURN_IF_ERROR(p->Begin(op == Op::kMin ? MPI_MIN : MPI_MAX, background_));
    return std::unique_ptr<Pending>(std::move(p));
  }

  bool point_to_point() const override { return true; }
  bool thread_multiple() const override { return thread_multiple_; }
  // The same members on duplicates of each communicator (collective).
  Result<std::unique_ptr<Group>> Duplicate() override {
    if (Finalized()) return AfterFinalize();
    auto g = std::unique_ptr<MpiGroup>(new MpiGroup(*this));
    g->comm_ = g->background_ = g->transfers_ = MPI_COMM_NULL;
    for (auto [from, to] : {std::pair{comm_, &g->comm_},
                            {background_, &g->background_},
                            {transfers_, &g->transfers_}}) {
      int err = MPI_Comm_dup(from, to);
      if (err != MPI_SUCCESS) return MpiError(err, "MPI_Comm_dup");
      MPI_Comm_set_errhandler(*to, MPI_ERRORS_RETURN);
    }
    return std::unique_ptr<Group>(std::move(g));
  }
  Result<std::unique_ptr<Request>> StartSend(int to, int tag, const uint8_t* data,
                                             size_t bytes) override {
    if (Finalized()) return AfterFinalize();
    if (bytes > static_cast<size_t>(std::numeric_limits<int>::max()))
      return Status::InvalidArgument("a message of " + std::to_string(bytes) + " bytes: too big for one MPI_Isend");
    auto r = std::make_unique<MpiRequest>(false);
    int err = MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, to, tag, transfers_, r->request());
    if (err != MPI_SUCCESS) return MpiError(err, "MPI_Isend");
    return std::unique_ptr<Request>(std::move(r));
  }
  Result<std::unique_ptr<Request>> StartReceive(int from, int tag, uint8_t* data,
                                                size_t capacity) override {
    if (Finalized()) return AfterFinalize();
    if (capacity > static_cast<size_t>(std::numeric_limits<int>::max()))
      return Status::InvalidArgument("a receive of " + std::to_string(capacity) + " bytes: too big for one MPI_Irecv");
    auto r = std::make_unique<MpiRequest>(true);
    int err = MPI_Irecv(data, static_cast<int>(capacity), MPI_BYTE, from, tag, transfers_, r->request());
    if (err != MPI_SUCCESS) return MpiError(err, "MPI_Irecv");
    return std::unique_ptr<Request>(std::move(r));
  }

  Status AllReduce(Op op, int64_t* values, size_t n) override {
    if (Finalized()) return AfterFinalize();
    int err = MPI_Allreduce(MPI_IN_PLACE, values, static_cast<int>(n), MPI_INT64_T,
                            op == Op::kMin ? MPI_MIN : MPI_MAX, comm_);
    return err == MPI_SUCCESS ? Status::Ok() : MpiError(err, "MPI_Allreduce");
  }

 private:
  MpiGroup() = default;
  MpiGroup(const MpiGroup&) = default;  // Duplicate: the fields, then new communicators

  // The node: ranks sharing memory (MPI_COMM_TYPE_SHARED) form one; nodes
  // are numbered by their lowest rank's order among the nodes' leaders.
  Status FindNode() {
    MPI_Comm local = MPI_COMM_NULL, leaders = MPI_COMM_NULL;
    int err = MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
    if (err != MPI_SUCCESS) return MpiError(err, "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)");
    int local_rank = 0;
    MPI_Comm_rank(local, &local_rank);
    err = MPI_Comm_split(comm_, local_rank == 0 ? 0 : MPI_UNDEFINED, rank_, &leaders);
    if (err == MPI_SUCCESS && leaders != MPI_COMM_NULL) MPI_Comm_rank(leaders, &node_);
    if (err == MPI_SUCCESS) err = MPI_Bcast(&node_, 1, MPI_INT, 0, local);
    if (leaders != MPI_COMM_NULL) MPI_Comm_free(&leaders);
    MPI_Comm_free(&local);
    return err == MPI_SUCCESS ? Status::Ok() : MpiError(err, "numbering the nodes");
  }

  // mpi.ranks_per_node = k (CAIRN_MPI_RANKS_PER_NODE; LoadConfig checked
  // k >= 0): node = rank / k, each with its own local directory. Every rank
  // must have the same k (one Allreduce checks it). A rank whose
  // configuration did not load (k < 0) makes no disagreement: its own error
  // is the one every rank reports (OpenInGroup).
  Status SimulateNodes(int ranks_per_node) {
    const int64_t k = std::max(ranks_per_node, 0);  // 0 = the real nodes
    const int64_t failed = ranks_per_node < 0 ? 1 : 0;
    // min of k and of -k: the least and the largest; min of -failed: any.
    int64_t range[3] = {failed ? INT64_MAX : k, failed ? INT64_MAX : -k, -failed};
    if (Status r = AllReduce(Op::kMin, range, 3); !r.ok()) return r;
    Status s;
    if (range[2] == 0 && range[0] != -range[1]) {
      s = Status::Config("mpi.ranks_per_node (CAIRN_MPI_RANKS_PER_NODE) differs across ranks (here " +
                         (k == 0 ? std::string("0, the real nodes") : std::to_string(k)) + ", elsewhere " +
                         std::to_string(range[0] == k ? -range[1] : range[0]) + ")");
    }
    if (s.ok() && k > 0) {
      simulated_ = true;
      ranks_per_node_ = static_cast<int>(k);
      node_ = static_cast<int>(rank_ / k);
    }
    return s;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm background_ = MPI_COMM_NULL;  // StartAllReduce only
  MPI_Comm transfers_ = MPI_COMM_NULL;   // StartSend / StartReceive only
  bool thread_multiple_ = false;         // MPI_Query_thread: MPI_THREAD_MULTIPLE
  int rank_ = 0;
  int size_ = 1;
  int node_ = 0;
  bool simulated_ = false;
  int ranks_per_node_ = 0;
};

}  // namespace

Result<std::unique_ptr<Group>> NewMpiGroup(MPI_Comm comm, int ranks_per_node, Status* setup) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<MpiGroup> group, MpiGroup::Create(comm, ranks_per_node, setup));
  return std::unique_ptr<Group>(std::move(group));
}

Result<std::unique_ptr<Client>> OpenMpi(MPI_Comm comm, const char* config_path) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return Status::InvalidArgument("cairn_open_mpi: MPI is not initialized (call MPI_Init first)");
  if (comm == MPI_COMM_NULL) return Status::InvalidArgument("cairn_open_mpi: the communicator is MPI_COMM_NULL");
  return OpenMpi(comm, LoadConfig(config_path));
}

Result<std::unique_ptr<Client>> OpenMpi(MPI_Comm comm, Result<Config> config) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return Status::InvalidArgument("cairn::OpenMpi: MPI is not initialized (call MPI_Init first)");
  if (comm == MPI_COMM_NULL) return Status::InvalidArgument("cairn::OpenMpi: the communicator is MPI_COMM_NULL");
  // The nodes come first (they decide each rank's directories); a rank whose
  // configuration failed takes part (-1) and reports its own error, which
  // OpenInGroup agrees on.
  Status setup;
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<MpiGroup> group,
                         MpiGroup::Create(comm, config.ok() ? config->ranks_per_node : -1, &setup));
  if (!setup.ok() && config.ok()) config = setup;
  return OpenInGroup(std::move(config), std::move(group));
}

}  // namespace cairn

extern "C" int cairn_open_mpi(MPI_Comm comm, const char* config_path, cairn_client_t** out) {
  try {
    if (out == nullptr) return cairn::ReportToC(cairn::Status::InvalidArgument("out is NULL"));
    *out = nullptr;
    auto client = cairn::OpenMpi(comm, config_path);
    if (!client.ok()) return cairn::ReportToC(client.status());
    *out = cairn::ToCHandle(std::move(client).value());
    return cairn::ReportToC(cairn::Status::Ok());
  } catch (const std::bad_alloc&) {
    return cairn::ReportToC(cairn::Status::NoMemory("out of memory"));
  } catch (const std::exception& e) {
    return cairn::ReportToC(cairn::Status::Internal(e.what()));
  }
}

// Bindings that cannot include mpi.h (Fortran's `use mpi` / mpi_f08 handles,
// mpi4py's comm.py2f()) pass the communicator's Fortran handle; MPI itself
// converts it, so the binding needs neither MPI's headers nor its C ABI.
extern "C" int cairn_open_mpi_f(MPI_Fint comm, const char* config_path, cairn_client_t** out) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    if (out != nullptr) *out = nullptr;
    return cairn::ReportToC(
        cairn::Status::InvalidArgument("cairn_open_mpi_f: MPI is not initialized (call MPI_Init first)"));
  }
  // Open MPI's MPI_Comm_f2c gives a null pointer for a handle that names no
  // communicator; MPICH's handles are never 0 either.
  MPI_Comm c = MPI_Comm_f2c(comm);
  if (c == MPI_Comm{}) {
    if (out != nullptr) *out = nullptr;
    return cairn::ReportToC(cairn::Status::InvalidArgument(
        "cairn_open_mpi_f: " + std::to_string(comm) + " is not the Fortran handle of a communicator"));
  }
  return cairn_open_mpi(c, config_path, out);
}

// The saved-job calls (cairn_mpi.h): C forms of the Client methods.
namespace {

template <typename Fn>
int GuardC(cairn_client_t* c, const char* name, Fn&& fn) noexcept {
  try {
    cairn::Client* client = cairn::FromCHandle(c);
    if (client == nullptr)
      return cairn::ReportToC(cairn::Status::InvalidArgument("client is NULL"));
    if (name == nullptr) return cairn::ReportToC(cairn::Status::InvalidArgument("name is NULL"));
    return cairn::ReportToC(fn(*client));
  } catch (const std::bad_alloc&) {
    return cairn::ReportToC(cairn::Status::NoMemory("out of memory"));
  } catch (const std::exception& e) {
    return cairn::ReportToC(cairn::Status::Internal(e.what()));
  }
}

}  // namespace

extern "C" int cairn_saved_ranks(cairn_client_t* c, const char* name, int64_t version,
                                 int* nranks) {
  return GuardC(c, name, [&](cairn::Client& client) -> cairn::Status {
    if (nranks == nullptr) return cairn::Status::InvalidArgument("nranks is NULL");
    *nranks = 0;
    auto n = client.SavedRanks(name, version);
    if (!n.ok()) return n.status();
    *nranks = *n;
    return cairn::Status::Ok();
  });
}

extern "C" int cairn_saved_latest(cairn_client_t* c, const char* name, int64_t* version,
                                  int* nranks) {
  return GuardC(c, name, [&](cairn::Client& client) -> cairn::Status {
    if (version == nullptr || nranks == nullptr)
      return cairn::Status::InvalidArgument("version or nranks is NULL");
    *version = -1;
    *nranks = 0;
    auto v = client.SavedLatest(name);
    if (!v.ok()) return v.status();
    *version = v->version;
    *nranks = v->ranks;
    return cairn::Status::Ok();
  });
}

extern "C" int cairn_saved_region_size(cairn_client_t* c, const char* name, int64_t version,
                                       int saved_rank, int region, size_t* bytes) {
  return GuardC(c, name, [&](cairn::Client& client) -> cairn::Status {
    if (bytes == nullptr) return cairn::Status::InvalidArgument("bytes is NULL");
    *bytes = 0;
    auto n = client.SavedRegionSize(name, version, saved_rank, region);
    if (!n.ok()) return n.status();
    *bytes = static_cast<size_t>(*n);
    return cairn::Status::Ok();
  });
}

extern "C" int cairn_read_saved_region(cairn_client_t* c, const char* name, int64_t version,
                                       int saved_rank, int region, size_t offset, void* dst,
                                       size_t bytes) {
  return GuardC(c, name, [&](cairn::Client& client) {
    return client.ReadSavedRegion(name, version, saved_rank, region, offset, dst, bytes);
  });
}
