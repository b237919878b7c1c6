// The MPI group of cairn.Client(comm=...). The extension links its core
// statically (bindings/python/CMakeLists.txt) while libcairn_mpi sits on
// libcairn.so, another copy of the core: a client of one copy cannot be used
// through the other. So the client is opened here, by this copy's
// OpenInGroup, in a cairn::Group whose calls go through libcairn_mpi's plain C
// group (cairn_mpi.h, "For bindings"), loaded with dlopen: no C++ type
// crosses between the copies, and the extension needs neither mpi.h nor
// libmpi at build or import time (mpi4py has loaded libmpi by the time a
// communicator exists).
#include "mpi_group.hpp"

#include <dlfcn.h>

#include <cstdint>
#include <vector>

#include "cairn/group.hpp"

namespace cairn_py {
namespace {

struct CGroup;  // cairn_mpi_group_t

// libcairn_mpi's C group, resolved once per client.
struct Api {
  void* lib = nullptr;
  int (*open_f)(int, int, CGroup**) = nullptr;
  int (*setup_error)(const CGroup*) = nullptr;
  void (*info)(const CGroup*, int*) = nullptr;
  int (*allreduce)(CGroup*, int, int64_t*, size_t) = nullptr;
  int (*exchange)(CGroup*, size_t, const int*, const void* const*, const size_t*, size_t, const int*,
                  void* (*)(void*, size_t, size_t), void*) = nullptr;
  void (*free)(CGroup*) = nullptr;
  const char* (*last_error)() = nullptr;

  cairn::Status Error(int rc) const {
    return cairn::Status(static_cast<cairn::Code>(rc), last_error != nullptr ? last_error() : "");
  }
};

template <typename F>
bool Resolve(void* lib, const char* name, F* f) {
  *f = reinterpret_cast<F>(dlsym(lib, name));
  return *f != nullptr;
}

cairn::Result<Api> Load(const std::string& library) {
  Api api;
  // RTLD_GLOBAL: not needed; libmpi is already loaded (by mpi4py) and shared.
  api.lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (api.lib == nullptr) {
    const char* why = dlerror();
    return cairn::Status::Unsupported("cairn.Client(comm=...) needs libcairn_mpi (Cairn built with MPI): " +
                                      std::string(why != nullptr ? why : library) +
                                      " (set CAIRN_MPI_LIBRARY to its path)");
  }
  if (!Resolve(api.lib, "cairn_mpi_group_open_nodes_f", &api.open_f) ||
      !Resolve(api.lib, "cairn_mpi_group_setup_error", &api.setup_error) ||
      !Resolve(api.lib, "cairn_mpi_group_info", &api.info) ||
      !Resolve(api.lib, "cairn_mpi_group_allreduce", &api.allreduce) ||
      !Resolve(api.lib, "cairn_mpi_group_exchange", &api.exchange) ||
      !Resolve(api.lib, "cairn_mpi_group_free", &api.free) ||
      !Resolve(api.lib, "cairn_last_error", &api.last_error)) {
    dlclose(api.lib);
    return cairn::Status::Unsupported(library + " lacks the C group of cairn_mpi.h (an older libcairn_mpi?)");
  }
  return api;
}

class DlGroup final : public cairn::Group {
 public:
  DlGroup(Api api, CGroup* g) : api_(api), g_(g) { api_.info(g_, info_); }
  ~DlGroup() override {
    api_.free(g_);
    // libcairn_mpi stays loaded: MPI may still run its code (attributes of
    // the communicators it duplicated) until MPI_Finalize.
  }

  int rank() const override { return info_[0]; }
  int size() const override { return info_[1]; }
  int node() const override { return info_[2]; }
  bool simulated_nodes() const override { return info_[3] != 0; }
  int ranks_per_node() const override { return info_[4]; }

  cairn::Status AllReduce(Op op, int64_t* values, size_t n) override {
    int rc = api_.allreduce(g_, op == Op::kMax ? 1 : 0, values, n);
    return rc == 0 ? cairn::Status::Ok() : api_.Error(rc);
  }

  cairn::Status Exchange(const std::vector<Outgoing>& sends, const std::vector<int>& from,
                         std::vector<std::vector<uint8_t>>* received) override {
    std::vector<int> to(sends.size());
    std::vector<const void*> data(sends.size());
    std::vector<size_t> bytes(sends.size());
    for (size_t i = 0; i < sends.size(); ++i) {
      to[i] = sends[i].to;
      data[i] = sends[i].data;
      bytes[i] = sends[i].bytes;
    }
    received->assign(from.size(), {});
    auto receive = [](void* ctx, size_t i, size_t n) -> void* {
      auto& out = (*static_cast<std::vector<std::vector<uint8_t>>*>(ctx))[i];
      out.resize(n);
      return out.data();
    };
    int rc = api_.exchange(g_, sends.size(), to.data(), data.data(), bytes.data(), from.size(), from.data(),
                           receive, received);
    return rc == 0 ? cairn::Status::Ok() : api_.Error(rc);
  }

  cairn::Status SetupError() const {
    int rc = api_.setup_error(g_);
    return rc == 0 ? cairn::Status::Ok() : api_.Error(rc);
  }

 private:
  Api api_;
  CGroup* g_;
  int info_[5] = {0, 1, 0, 0, 0};
};

}  // namespace

cairn::Result<std::unique_ptr<cairn::Client>> OpenMpiClient(cairn::Result<cairn::Config> config, int fcomm,
                                                            const std::string& library) {
  CAIRN_ASSIGN_OR_RETURN(Api api, Load(library));
  CGroup* g = nullptr;
  if (int rc = api.open_f(fcomm, config.ok() ? config->ranks_per_node : -1, &g); rc != 0) return api.Error(rc);
  auto group = std::make_unique<DlGroup>(api, g);
  cairn::Status setup = group->SetupError();
  if (!setup.ok() && config.ok()) config = setup;
  return cairn::OpenInGroup(std::move(config), std::move(group));
}

}  // namespace cairn_py
