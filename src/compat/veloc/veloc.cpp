// libcairn_veloc: VELOC's C API (include/veloc.h) over Cairn (docs/veloc.md).
// Each function finds the process's one client, calls the Shim and turns its
// Status into VELOC's return code, printing the reason for a failure on
// stderr (VELOC's API has no error string). No exception leaves a function.
#include <cstdio>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <utility>

// The API is what veloc.h declares: with default visibility, everything
// else is hidden (src/compat/veloc/veloc.map lists the same names).
#pragma GCC visibility push(default)
#include "veloc.h"
#pragma GCC visibility pop

#include "cairn/cairn_mpi.h"
#include "compat/veloc/veloc_config.hpp"
#include "compat/veloc/veloc_shim.hpp"

namespace cairn::veloc {
namespace {

std::unique_ptr<Shim> g_shim;  // VELOC's API has one client per process

int Fail(const char* call, const Status& s) {
  std::fprintf(stderr, "VELOC (Cairn): %s: %s\n", call, s.ToString().c_str());
  return VELOC_FAILURE;
}

int Report(const char* call, const Status& s) { return s.ok() ? VELOC_SUCCESS : Fail(call, s); }

// Runs f(shim) -> Status for a VELOC call that needs the client.
template <typename F>
int WithShim(const char* call, F&& f) {
  if (!g_shim) return Fail(call, Status::State("VELOC is not initialized (call VELOC_Init first)"));
  try {
    return Report(call, std::forward<F>(f)(*g_shim));
  } catch (const std::bad_alloc&) {
    return Fail(call, Status::NoMemory("out of memory"));
  } catch (const std::exception& e) {
    return Fail(call, Status::Internal(e.what()));
  }
}

void PrintNotes(const VelocConfig& config) {
  for (const std::string& note : config.notes) std::fprintf(stderr, "VELOC (Cairn): note: %s\n", note.c_str());
}

// The open shared by VELOC_Init and VELOC_Init_single.
template <typename Open>
int Init(const char* call, const char* cfg_file, bool print_notes, std::string tag, int unique_id, Open&& open) {
  if (g_shim) return Fail(call, Status::State("VELOC is already initialized (VELOC_Finalize first)"));
  try {
    Result<VelocConfig> config = LoadVelocConfig(cfg_file);
    if (config.ok() && print_notes) PrintNotes(*config);
    const bool sync = config.ok() && config->sync;
    const std::string root = config.ok() ? config->cairn.scratch_dir : std::string();
    // open(nullptr, why): the file did not load; MPI's open still runs, so
    // that every rank fails together.
    Result<std::unique_ptr<Client>> client = config.ok()
                                                 ? std::forward<Open>(open)(&*config, Status::Ok())
                                                 : std::forward<Open>(open)(nullptr, config.status());
    if (!client.ok()) return Fail(call, client.status());
    g_shim = std::make_unique<Shim>(std::move(client).value(), sync, root, std::move(tag), unique_id);
    return VELOC_SUCCESS;
  } catch (const std::bad_alloc&) {
    return Fail(call, Status::NoMemory("out of memory"));
  } catch (const std::exception& e) {
    return Fail(call, Status::Internal(e.what()));
  }
}

}  // namespace
}  // namespace cairn::veloc

using cairn::Result;
using cairn::Status;
using cairn::veloc::Shim;
using cairn::veloc::WithShim;

// --- Init / Finalize ---------------------------------------------------------

int VELOC_Init(MPI_Comm comm, const char* cfg_file) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int rank = 0;
  if (initialized && comm != MPI_COMM_NULL) MPI_Comm_rank(comm, &rank);
  return cairn::veloc::Init("VELOC_Init", cfg_file, rank == 0, "rank" + std::to_string(rank), rank,
                            [&](const cairn::veloc::VelocConfig* config, const Status& why) {
                              return cairn::OpenMpi(comm, config != nullptr ? Result<cairn::Config>(config->cairn)
                                                                            : Result<cairn::Config>(why));
                            });
}

int VELOC_Init_single(unsigned int id, const char* cfg_file) {
  const std::string tag = "id" + std::to_string(id);
  return cairn::veloc::Init("VELOC_Init_single", cfg_file, true, tag, static_cast<int>(id),
                            [&](const cairn::veloc::VelocConfig* config,
                                const Status& why) -> Result<std::unique_ptr<cairn::Client>> {
                              if (config == nullptr) return why;
                              // A process on its own: its own subdirectories (MPI ranks use rank<r>).
                              cairn::Config c = config->cairn;
                              c.scratch_dir += "/" + tag;
                              c.persistent_dir += "/" + tag;
                              return cairn::Client::Open(c);
                            });
}

int VELOC_Finalize(int cleanup) {
  if (!cairn::veloc::g_shim) {
    return cairn::veloc::Fail("VELOC_Finalize", Status::State("VELOC is not initialized"));
  }
  int rc = WithShim("VELOC_Finalize", [&](Shim& s) { return s.Close(cleanup != 0); });
  cairn::veloc::g_shim.reset();
  return rc;
}

// --- Memory and files --------------------------------------------------------

int VELOC_Mem_protect(int id, void* ptr, size_t count, size_t base_size) {
  return WithShim("VELOC_Mem_protect", [&](Shim& s) { return s.MemProtect(id, ptr, count, base_size, ""); });
}

int VELOC_Region_protect(int id, void* ptr, size_t count, size_t base_size, const char* name) {
  return WithShim("VELOC_Region_protect", [&](Shim& s) { return s.MemProtect(id, ptr, count, base_size, name); });
}

int VELOC_Mem_unprotect(int id) {
  return WithShim("VELOC_Mem_unprotect", [&](Shim& s) { return s.MemUnprotect(id, ""); });
}

int VELOC_Region_unprotect(int id, const char* name) {
  return WithShim("VELOC_Region_unprotect", [&](Shim& s) { return s.MemUnprotect(id, name); });
}

int VELOC_Mem_clear() {
  return WithShim("VELOC_Mem_clear", [&](Shim& s) { return s.MemClear(""); });
}

int VELOC_Region_clear(const char* name) {
  return WithShim("VELOC_Region_clear", [&](Shim& s) { return s.MemClear(name); });
}

int VELOC_Cleanup(const char* name) {
  return WithShim("VELOC_Cleanup", [&](Shim& s) { return s.Cleanup(name); });
}

int VELOC_Route_file(const char* original, char* routed) {
  if (routed == nullptr) return cairn::veloc::Fail("VELOC_Route_file", Status::InvalidArgument("routed is NULL"));
  routed[0] = '\0';
  return WithShim("VELOC_Route_file", [&](Shim& s) -> Status {
    CAIRN_ASSIGN_OR_RETURN(std::string path, s.RouteFile(original));
    path.copy(routed, path.size());  // RouteFile checked it fits VELOC_MAX_NAME
    routed[path.size()] = '\0';
    return Status::Ok();
  });
}

// --- Checkpoint --------------------------------------------------------------

int VELOC_Checkpoint_begin(const char* name, int version) {
  return WithShim("VELOC_Checkpoint_begin", [&](Shim& s) { return s.CheckpointBegin(name, version); });
}

int VELOC_Checkpoint_selective(int mode, int* ids, int id_count) {
  return WithShim("VELOC_Checkpoint_selective", [&](Shim& s) { return s.CheckpointSelective(mode, ids, id_count); });
}

int VELOC_Checkpoint_mem() {
  return WithShim("VELOC_Checkpoint_mem", [&](Shim& s) { return s.CheckpointSelective(VELOC_CKPT_ALL, nullptr, 0); });
}

int VELOC_Checkpoint_end(int /*success*/) {  // VELOC ignores it too (docs/veloc.md)
  return WithShim("VELOC_Checkpoint_end", [&](Shim& s) { return s.CheckpointEnd(); });
}

int VELOC_Checkpoint_wait() {
  return WithShim("VELOC_Checkpoint_wait", [&](Shim& s) { return s.CheckpointWait(); });
}

int VELOC_Checkpoint_finished() {
  int ready = 0;
  int rc = WithShim("VELOC_Checkpoint_finished", [&](Shim& s) -> Status {
    CAIRN_ASSIGN_OR_RETURN(bool r, s.BackendReady());
    ready = r ? 1 : 0;
    return Status::Ok();
  });
  return rc == VELOC_SUCCESS && ready ? VELOC_SUCCESS : VELOC_FAILURE;
}

int VELOC_Backend_ready() {
  int ready = 0;
  int rc = WithShim("VELOC_Backend_ready", [&](Shim& s) -> Status {
    CAIRN_ASSIGN_OR_RETURN(bool r, s.BackendReady());
    ready = r ? 1 : 0;
    return Status::Ok();
  });
  return rc == VELOC_SUCCESS ? ready : VELOC_FAILURE;
}

int VELOC_Checkpoint(const char* name, int version) {
  return WithShim("VELOC_Checkpoint", [&](Shim& s) -> Status {
    CAIRN_RETURN_IF_ERROR(s.CheckpointWait());
    CAIRN_RETURN_IF_ERROR(s.CheckpointBegin(name, version));
    Status m = s.CheckpointSelective(VELOC_CKPT_ALL, nullptr, 0);
    Status e = s.CheckpointEnd();  // ends the phase even when the selection failed
    return m.ok() ? e : m;
  });
}

// --- Restart -----------------------------------------------------------------

int VELOC_Restart_test(const char* name, int version) {
  int found = VELOC_FAILURE;
  int rc = WithShim("VELOC_Restart_test", [&](Shim& s) -> Status {
    Result<int64_t> v = s.RestartTest(name, version);
    if (!v.ok() && v.status().code() == cairn::Code::kNotFound) return Status::Ok();  // none: VELOC_FAILURE, quietly
    CAIRN_RETURN_IF_ERROR(v.status());
    if (*v > INT_MAX) return Status::InvalidArgument("version " + std::to_string(*v) + " does not fit VELOC's int");
    found = static_cast<int>(*v);
    return Status::Ok();
  });
  return rc == VELOC_SUCCESS ? found : VELOC_FAILURE;
}

int VELOC_Restart_begin(const char* name, int version) {
  return WithShim("VELOC_Restart_begin", [&](Shim& s) { return s.RestartBegin(name, version); });
}

int VELOC_Recover_selective(int mode, int* ids, int id_count) {
  return WithShim("VELOC_Recover_selective", [&](Shim& s) { return s.RecoverSelective(mode, ids, id_count); });
}

int VELOC_Recover_mem() {
  return WithShim("VELOC_Recover_mem", [&](Shim& s) { return s.RecoverSelective(VELOC_RECOVER_ALL, nullptr, 0); });
}

int VELOC_Recover_size(int id) {
  int64_t size = -1;
  WithShim("VELOC_Recover_size", [&](Shim& s) -> Status {
    Result<int64_t> r = s.RecoverSize(id);
    if (!r.ok() && r.status().code() == cairn::Code::kNotFound) return Status::Ok();  // -1, quietly (its normal answer)
    CAIRN_ASSIGN_OR_RETURN(int64_t bytes, std::move(r));
    if (bytes > INT_MAX) return Status::InvalidArgument("region " + std::to_string(id) + " has " + std::to_string(bytes) + " bytes, more than an int holds");
    size = bytes;
    return Status::Ok();
  });
  return static_cast<int>(size);
}

int VELOC_Restart_end(int /*success*/) {
  return WithShim("VELOC_Restart_end", [&](Shim& s) { return s.RestartEnd(); });
}

int VELOC_Restart(const char* name, int version) {
  return WithShim("VELOC_Restart", [&](Shim& s) -> Status {
    CAIRN_RETURN_IF_ERROR(s.RestartBegin(name, version));
    Status r = s.RecoverSelective(VELOC_RECOVER_ALL, nullptr, 0);
    Status e = s.RestartEnd();
    return r.ok() ? e : r;
  });
}
