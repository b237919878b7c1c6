// libcairn_fti's state and the helpers of its entry points (fti_context.hpp).
#include "fti_context.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace cairn::fti {
namespace {

// Sets the CAIRN_* variables that carry the FTI configuration into
// cairn_open_mpi, for the open only; a variable the user set wins
// (Cairn's rule: the environment overrides files).
class EnvForOpen {
 public:
  void Set(const char* name, const std::string& value) {
    if (std::getenv(name) != nullptr) return;
    setenv(name, value.c_str(), 1);
    set_.push_back(name);
  }
  ~EnvForOpen() {
    for (const char* name : set_) unsetenv(name);
  }

 private:
  std::vector<const char*> set_;
};

}  // namespace

std::unique_ptr<Context> g;
std::vector<size_t> g_types(std::begin(kBasicSizes), std::end(kBasicSizes));

int Verbosity() { return g ? g->config.verbosity : FTI_INFO; }

// FTI's output: errors and warnings on every rank (stderr), information on
// rank 0 (stdout), debug messages on every rank.
void Print(int priority, const char* fmt, ...) {
  if (priority < Verbosity()) return;
  int rank = 0;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (priority == FTI_INFO && rank != 0) return;
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char* kind = priority == FTI_EROR   ? "Error"
                     : priority == FTI_WARN ? "Warning"
                     : priority == FTI_INFO ? "Information"
                                            : "Debug";
  std::fprintf(priority >= FTI_WARN ? stderr : stdout, "[ FTI %s - %06d ] : %s\n", kind, rank, msg);
}

bool Ready(const char* what) {
  if (g) return true;
  Print(FTI_WARN, "%s: FTI is not initialized (call FTI_Init first)", what);
  return false;
}

// Every rank's `ok`, agreed: false on every rank if false on one.
bool AllOk(MPI_Comm comm, bool ok) {
  int v = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, comm);
  return v == 1;
}

Result<Unit> IntervalUnit() {
  const char* env = std::getenv("CAIRN_FTI_INTERVAL_UNIT");
  const std::string v = env != nullptr ? env : "";
  if (v.empty() || v == "minutes") return Unit::kMinutes;
  if (v == "seconds") return Unit::kSeconds;
  if (v == "calls") return Unit::kCalls;
  return Status::Config("CAIRN_FTI_INTERVAL_UNIT is '" + v +
                        "'; it must be minutes (FTI's), seconds or calls");
}

// The local checks of FTI_Init: the configuration and the topology.
Status CheckLocal(Context* c, const char* path, MPI_Comm comm, int size) {
  if (path == nullptr) return Status::Config("FTI_Init: configFile is NULL");
  CAIRN_ASSIGN_OR_RETURN(c->config, LoadConfig(path));
  CAIRN_ASSIGN_OR_RETURN(c->unit, IntervalUnit());
  const int k = c->config.node_size;
  if (size % k != 0) {
    return Status::Config(std::string(path) + ": node_size = " + std::to_string(k) +
                          " does not divide the " + std::to_string(size) +
                          " ranks; FTI needs the same number of ranks on every node");
  }
  if (!c->config.local_test) {
    MPI_Comm node = MPI_COMM_NULL;
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node);
    int here = 0;
    MPI_Comm_size(node, &here);
    MPI_Comm_free(&node);
    if (here != k) {
      return Status::Config(
          std::string(path) + ": node_size = " + std::to_string(k) + ", but rank " +
          std::to_string(c->rank) + "'s node runs " + std::to_string(here) +
          " ranks: set node_size to the ranks per node, or [advanced] local_test = 1 "
          "to simulate nodes of node_size ranks on one machine");
    }
  }
  return Status::Ok();
}

// Opens Cairn with the configuration mapped onto its settings (docs/fti.md).
int OpenCairn(Context* c, MPI_Comm comm, int size) {
  const FtiConfig& f = c->config;
  const int nodes = size / f.node_size;
  EnvForOpen env;
  env.Set("CAIRN_SCRATCH", f.ckpt_dir);
  env.Set("CAIRN_PERSISTENT", f.glbl_dir);
  if (f.local_test) env.Set("CAIRN_MPI_RANKS_PER_NODE", std::to_string(f.node_size));
  if (f.mtbf_s > 0) env.Set("CAIRN_MTBF", std::to_string(f.mtbf_s));
  if (f.dcp) {
    env.Set("CAIRN_CHANGES", "hash");
    if (f.dcp_block_size > 0) env.Set("CAIRN_HASH_CHUNK", std::to_string(f.dcp_block_size));
    // FTI starts a new file, a full checkpoint, every dcp_stack_size dCP
    // checkpoints: a full version and stack - 1 layers on it.
    if (f.dcp_stack_size > 0) env.Set("CAIRN_MAX_LAYERS", std::to_string(f.dcp_stack_size - 1));
  }
  // L2 needs a partner on another node, L3 a set of group_size nodes.
  c->l2 = nodes >= 2;
  c->l3 = f.group_size >= 2 && f.group_size <= nodes;
  if (c->l2) env.Set("CAIRN_L2_EVERY", kOnRequest);
  if (c->l3) {
    env.Set("CAIRN_L3_EVERY", kOnRequest);
    env.Set("CAIRN_L3_GROUP", std::to_string(f.group_size));
#if CAIRN_HAVE_ISAL
    // FTI's L3 is Reed-Solomon that survives the loss of half a group (each
    // rank's encoded chunk as large as its checkpoint): Cairn's RS sets with
    // group_size / 2 parity rows are the same. Without ISA-L, XOR (one loss).
    env.Set("CAIRN_L3_CODE", "rs");
    env.Set("CAIRN_L3_PARITY", std::to_string(f.group_size / 2));
#endif
  }
  // NULL: Cairn's own settings from CAIRN_CONFIG / CAIRN_* on top.
  if (cairn_open_mpi(comm, nullptr, &c->client) != CAIRN_OK) {
    Print(FTI_EROR, "FTI_Init: opening Cairn failed: %s", cairn_last_error());
    return FTI_NSCS;
  }
  return FTI_SCES;
}

// The restart: the newest checkpoint every rank has (collective).
int FindCheckpoint(Context* c) {
  int64_t v = -1;
  const int err = cairn_latest(c->client, kName, &v);
  if (err == CAIRN_ERR_NOT_FOUND) return FTI_SCES;
  if (err != CAIRN_OK) {
    Print(FTI_EROR, "FTI_Init: looking for a checkpoint to recover failed: %s", cairn_last_error());
    return FTI_NREC;
  }
  c->reco = true;
  c->found = v;
  c->versions.Seed(kName, v);
  Print(FTI_INFO, "FTI_Init: checkpoint %d found: this is a restart", cairn::compat::PeerId(v));
  return FTI_SCES;
}

int Fail(const char* what) {
  Print(FTI_EROR, "%s failed: %s", what, cairn_last_error());
  return FTI_NSCS;
}

// The checkpoint found at init counts as recovered as `v` (FTI_Recover,
// FTI_RecoverVarFinalize): FTI_Snapshot's schedule goes on from the
// recovered count (time restarts now).
void Recovered(Context* c, int64_t v) {
  c->reco = false;
  c->last = v;
  c->base = c->snap.count;
  c->start = MPI_Wtime();
  const int id = cairn::compat::PeerId(v);
  if (c->snap.next_id <= id) c->snap.next_id = static_cast<int64_t>(id) + 1;
}

// Copies region `region` of the checkpoint being recovered (this rank's) into
// host memory [dst, dst + bytes): Cairn's read of a saved region verifies
// every block and falls back from the local copy to glbl_dir.
int ReadStored(Context* c, const char* what, int region, void* dst, size_t bytes) {
  if (cairn_read_saved_region(c->client, kName, c->found, c->rank, region, 0, dst, bytes) !=
      CAIRN_OK) {
    Print(FTI_EROR, "%s: reading dataset %d of checkpoint %d failed: %s", what, region,
          cairn::compat::PeerId(c->found), cairn_last_error());
    return FTI_NREC;
  }
  return FTI_SCES;
}

// FTI_Realloc's work; *done tells whether ptr was reallocated (FTI_Realloc
// returns ptr unchanged either way on failure, the Fortran module needs to know).
void* Realloc(int id, void* ptr, bool* done) {
  *done = false;
  if (!Ready("FTI_Realloc")) return ptr;
  if (!g->reco) {
    Print(FTI_WARN, "FTI_Realloc: dataset %d: this is not a restart, nothing to reallocate", id);
    return ptr;
  }
  auto it = g->data.find(id);
  if (it == g->data.end()) {
    Print(FTI_WARN, "FTI_Realloc: dataset %d is not protected (FTI_Protect it first)", id);
    return ptr;
  }
  size_t stored = 0;
  if (cairn_saved_region_size(g->client, kName, g->found, g->rank, id, &stored) != CAIRN_OK ||
      stored == 0) {
    Print(FTI_WARN, "FTI_Realloc: dataset %d: %s", id,
          stored == 0 ? "its stored size is 0 (or unknown), not reallocated" : cairn_last_error());
    return ptr;
  }
  void* grown = std::realloc(ptr, stored);
  if (grown == nullptr) {
    Print(FTI_WARN, "FTI_Realloc: dataset %d: no memory for %zu bytes", id, stored);
    return ptr;
  }
  *done = true;
  // The old buffer is gone: protect the new one before anything else runs.
  if (cairn_protect(g->client, id, grown, stored) != CAIRN_OK) {
    Print(FTI_EROR, "FTI_Realloc: protecting dataset %d's new buffer failed: %s", id,
          cairn_last_error());
    // The old buffer is freed: no checkpoint may read it.
    (void)cairn_unprotect(g->client, id);
    g->data.erase(it);
    return grown;
  }
  it->second.ptr = grown;
  it->second.bytes = static_cast<int64_t>(stored);
  Print(FTI_DBUG, "FTI_Realloc: dataset %d reallocated to %zu bytes", id, stored);
  return grown;
}

size_t TypeSize(fti_id_t t) {
  return t >= 0 && static_cast<size_t>(t) < g_types.size() ? g_types[static_cast<size_t>(t)] : 0;
}

}  // namespace cairn::fti
