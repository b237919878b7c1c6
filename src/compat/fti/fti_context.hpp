// libcairn_fti's state and the helpers of its entry points (fti.cpp): FTI's
// API is a process-wide singleton; here its state is one Context, created by
// FTI_Init and destroyed by FTI_Finalize, touched only by the thread that
// calls FTI (as FTI requires). Internal to libcairn_fti (fti.map exports
// FTI's API only).
#pragma once

#include <fti.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cairn/cairn_mpi.h"
#include "cairn/status.hpp"
#include "compat/peer_version.hpp"
#include "fti_config.hpp"

namespace cairn::fti {

inline constexpr const char* kName = "fti";  // the Cairn checkpoint name of FTI's datasets
// FTI_Snapshot's state travels in every checkpoint as this region, so that a
// restart resumes its schedule and checkpoint ids (docs/fti.md). FTI dataset
// ids must stay below it.
inline constexpr int kSnapshotRegion = 0x7ffffff0;
// CAIRN_L2_EVERY / CAIRN_L3_EVERY while opening: the levels are set up, but no
// count of waits ever reaches this, so only FTI_Checkpoint's level adds them.
// (mpi.l2_every / mpi.l3_every are ints: the largest.)
inline constexpr const char* kOnRequest = "2147483647";  // INT_MAX

inline constexpr size_t kBasicSizes[] = {
    sizeof(char),          sizeof(short),          sizeof(int),        sizeof(long),
    sizeof(unsigned char), sizeof(unsigned short), sizeof(unsigned),   sizeof(unsigned long),
    sizeof(float),         sizeof(double),         sizeof(long double)};

struct SnapshotState {  // plain data: it is checkpointed as bytes
  int64_t count = 0;    // elapsed units at the last FTI_Snapshot
  int64_t next_id = 1;  // id of FTI_Snapshot's next checkpoint
  int64_t next[4] = {0, 0, 0, 0};
};

enum class Unit { kMinutes, kSeconds, kCalls };

struct Dataset {
  void* ptr = nullptr;
  int64_t bytes = 0;
  // FTI_SetAttribute's values: FTI writes them into HDF5 output only, which
  // is not provided; kept so that the call has its documented effect.
  std::string name;
  std::vector<uint64_t> dims;
};

struct Context {
  FtiConfig config;
  MPI_Comm internal = MPI_COMM_NULL;  // FTI_Snapshot's agreement on the time
  cairn_client_t* client = nullptr;
  int rank = 0;
  bool l2 = false, l3 = false;  // set up at open
  std::map<int, Dataset> data;
  bool reco = false;   // a checkpoint to recover was found at init
  int64_t found = -1;  // ... this one (a Cairn version, compat/peer_version.hpp)
  int64_t last = -1;   // the newest checkpoint taken or recovered (Cairn version)
  // FTI ids may repeat: each checkpoint is a new Cairn version whose number
  // carries the id, so that the newest one taken is the one recovered.
  cairn::compat::PeerVersions versions;
  int last_level = 0;
  Unit unit = Unit::kMinutes;
  double start = 0;  // MPI_Wtime() at FTI_Init
  int64_t base = 0;  // the schedule's count in the recovered checkpoint
  SnapshotState snap;
};

extern std::unique_ptr<Context> g;   // FTI_Init .. FTI_Finalize
extern std::vector<size_t> g_types;  // FTI_InitType's sizes, by type id

// FTI's output: errors and warnings on every rank (stderr), information on
// rank 0 (stdout), debug messages on every rank.
void Print(int priority, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// Whether FTI_Init ran; else a warning naming `what`.
bool Ready(const char* what);
// Every rank's `ok`, agreed: false on every rank if false on one.
bool AllOk(MPI_Comm comm, bool ok);
// CAIRN_FTI_INTERVAL_UNIT: minutes (FTI's), seconds or calls.
Result<Unit> IntervalUnit();
// The local checks of FTI_Init: the configuration and the topology.
Status CheckLocal(Context* c, const char* path, MPI_Comm comm, int size);
// Opens Cairn with the configuration mapped onto its settings (docs/fti.md).
int OpenCairn(Context* c, MPI_Comm comm, int size);
// The restart: the newest checkpoint every rank has (collective).
int FindCheckpoint(Context* c);
// FTI_NSCS, after an error naming `what` and Cairn's last error.
int Fail(const char* what);
// The checkpoint found at init counts as recovered as `v` (FTI_Recover,
// FTI_RecoverVarFinalize): FTI_Snapshot's schedule goes on from the
// recovered count (time restarts now).
void Recovered(Context* c, int64_t v);
// Copies region `region` of the checkpoint being recovered (this rank's) into
// host memory [dst, dst + bytes): Cairn's read of a saved region verifies
// every block and falls back from the local copy to glbl_dir.
int ReadStored(Context* c, const char* what, int region, void* dst, size_t bytes);
// FTI_Realloc's work; *done tells whether ptr was reallocated (FTI_Realloc
// returns ptr unchanged either way on failure, the Fortran module needs to know).
void* Realloc(int id, void* ptr, bool* done);
// The size of type t, 0 for an unknown id.
size_t TypeSize(fti_id_t t);

}  // namespace cairn::fti
