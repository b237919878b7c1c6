// The C form of libcairn_mpi's group (cairn_mpi.h, "For bindings"): a binding
// whose own copy of the core opens the client (Python's extension links the
// core statically) gets the communicator's rank, node and transport through
// plain C calls, with no C++ type crossing between the two copies.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <new>
#include <vector>

#include "cairn/cairn_mpi.h"
#include "cairn/group.hpp"
#include "mpi_group.hpp"

struct cairn_mpi_group {
  std::unique_ptr<cairn::Group> group;
  cairn::Status setup;
};

namespace {

template <typename Fn>
int Guard(Fn&& fn) noexcept {
  try {
    return cairn::ReportToC(fn());
  } catch (const std::bad_alloc&) {
    return cairn::ReportToC(cairn::Status::NoMemory("out of memory"));
  } catch (const std::exception& e) {
    return cairn::ReportToC(cairn::Status::Internal(e.what()));
  }
}

}  // namespace

extern "C" int cairn_mpi_group_open_nodes_f(MPI_Fint comm, int ranks_per_node, cairn_mpi_group_t** out) {
  return Guard([&]() -> cairn::Status {
    if (out == nullptr) return cairn::Status::InvalidArgument("out is NULL");
    *out = nullptr;
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized)
      return cairn::Status::InvalidArgument("cairn_mpi_group_open_nodes_f: MPI is not initialized (call MPI_Init first)");
    MPI_Comm c = MPI_Comm_f2c(comm);
    if (c == MPI_Comm{} || c == MPI_COMM_NULL)
      return cairn::Status::InvalidArgument("cairn_mpi_group_open_nodes_f: " + std::to_string(comm) +
                                            " is not the Fortran handle of a communicator");
    auto g = std::make_unique<cairn_mpi_group>();
    CAIRN_ASSIGN_OR_RETURN(g->group, cairn::NewMpiGroup(c, ranks_per_node, &g->setup));
    *out = g.release();
    return cairn::Status::Ok();
  });
}

extern "C" int cairn_mpi_group_setup_error(const cairn_mpi_group_t* g) {
  return Guard([&] { return g == nullptr ? cairn::Status::InvalidArgument("group is NULL") : g->setup; });
}

extern "C" void cairn_mpi_group_info(const cairn_mpi_group_t* g, int info[5]) {
  info[0] = g->group->rank();
  info[1] = g->group->size();
  info[2] = g->group->node();
  info[3] = g->group->simulated_nodes() ? 1 : 0;
  info[4] = g->group->ranks_per_node();
}

extern "C" int cairn_mpi_group_allreduce(cairn_mpi_group_t* g, int max, int64_t* values, size_t n) {
  return Guard([&] {
    return g->group->AllReduce(max != 0 ? cairn::Group::Op::kMax : cairn::Group::Op::kMin, values, n);
  });
}

extern "C" int cairn_mpi_group_exchange(cairn_mpi_group_t* g, size_t nsends, const int* to,
                                        const void* const* data, const size_t* bytes, size_t nfrom,
                                        const int* from,
                                        void* (*receive)(void* ctx, size_t i, size_t bytes),
                                        void* ctx) {
  return Guard([&]() -> cairn::Status {
    std::vector<cairn::Group::Outgoing> sends(nsends);
    for (size_t i = 0; i < nsends; ++i)
      sends[i] = {to[i], static_cast<const uint8_t*>(data[i]), bytes[i]};
    std::vector<std::vector<uint8_t>> received;
    CAIRN_RETURN_IF_ERROR(g->group->Exchange(sends, std::vector<int>(from, from + nfrom), &received));
    for (size_t i = 0; i < received.size(); ++i) {
      void* dst = receive(ctx, i, received[i].size());
      if (dst == nullptr && !received[i].empty()) return cairn::Status::NoMemory("receive buffer");
      if (!received[i].empty()) std::memcpy(dst, received[i].data(), received[i].size());
    }
    return cairn::Status::Ok();
  });
}

extern "C" void cairn_mpi_group_free(cairn_mpi_group_t* g) { delete g; }  // NULL: nothing
