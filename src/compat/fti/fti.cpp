// libcairn_fti: FTI's public C API (include/fti.h) over Cairn's MPI client
// (docs/fti.md): the entry points. FTI's state (one Context from FTI_Init to
// FTI_Finalize) and the helpers they share are fti_context.hpp.
#include <fti.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "cairn/cairn_mpi.h"
#include "cairn/group.hpp"
#include "fti_context.hpp"
#include "fti_snapshot.hpp"

MPI_Comm FTI_COMM_WORLD = MPI_COMM_NULL;

// The predefined types: their ids index kBasicSizes (FTI numbers them the
// same way, in this order).
fti_id_t FTI_CHAR = 0, FTI_SHRT = 1, FTI_INTG = 2, FTI_LONG = 3, FTI_UCHR = 4, FTI_USHT = 5,
         FTI_UINT = 6, FTI_ULNG = 7, FTI_SFLT = 8, FTI_DBLE = 9, FTI_LDBE = 10;

using namespace cairn::fti;  // NOLINT: the C entry points below

extern "C" int FTI_Init(const char* configFile, MPI_Comm globalComm) {
  if (g) {
    Print(FTI_WARN, "FTI_Init: FTI is already initialized");
    return FTI_NSCS;
  }
  auto c = std::make_unique<Context>();
  int size = 1;
  MPI_Comm_rank(globalComm, &c->rank);
  MPI_Comm_size(globalComm, &size);
  const cairn::Status s = CheckLocal(c.get(), configFile, globalComm, size);
  if (!s.ok()) Print(FTI_EROR, "FTI_Init: %s", s.message().c_str());
  if (!AllOk(globalComm, s.ok())) {
    if (s.ok()) Print(FTI_EROR, "FTI_Init: the configuration failed on another rank (its message says why)");
    return FTI_NSCS;
  }
  if (c->rank == 0 && c->config.verbosity <= FTI_INFO) {
    for (const std::string& note : c->config.notes) std::printf("[ FTI Information - 000000 ] : %s\n", note.c_str());
  }
  if (OpenCairn(c.get(), globalComm, size) != FTI_SCES) return FTI_NSCS;
  if (FTI_COMM_WORLD != MPI_COMM_NULL) MPI_Comm_free(&FTI_COMM_WORLD);  // a second FTI_Init
  MPI_Comm_dup(globalComm, &FTI_COMM_WORLD);
  MPI_Comm_dup(globalComm, &c->internal);
  c->start = MPI_Wtime();
  for (size_t i = 0; i < 4; ++i) c->snap.next[i] = 0;
  g = std::move(c);
  // FTI_Snapshot's state is part of every checkpoint (restored with it).
  if (cairn_protect(g->client, kSnapshotRegion, &g->snap, sizeof g->snap) != CAIRN_OK) {
    return Fail("FTI_Init: protecting FTI_Snapshot's state");
  }
  return FindCheckpoint(g.get());
}

// For the Fortran module fti (src/compat/fti/fti.f90), as FTI's own wrapper: the
// communicator's Fortran handle in, FTI_COMM_WORLD's out. Exported (FTI_*)
// but not declared in fti.h.
extern "C" FTI_EXPORT int FTI_Init_fort_wrapper(const char* configFile, MPI_Fint* globalComm) {
  if (globalComm == nullptr) return FTI_NSCS;
  const int rc = FTI_Init(configFile, MPI_Comm_f2c(*globalComm));
  if (rc == FTI_SCES) *globalComm = MPI_Comm_c2f(FTI_COMM_WORLD);
  return rc;
}

extern "C" int FTI_Status(void) { return g && g->reco ? 1 : 0; }

extern "C" int FTI_InitType(fti_id_t* type, int size) {
  if (type == nullptr || size <= 0) {
    Print(FTI_WARN, "FTI_InitType: %s", type == nullptr ? "type is NULL" : "types must have a positive size");
    return FTI_NSCS;
  }
  *type = static_cast<fti_id_t>(g_types.size());
  g_types.push_back(static_cast<size_t>(size));
  return FTI_SCES;
}

extern "C" fti_id_t FTI_InitCompositeType(const char*, size_t size, FTIT_H5Group*) {
  fti_id_t t = FTI_NSCS;
  return FTI_InitType(&t, static_cast<int>(size)) == FTI_SCES ? t : FTI_NSCS;
}

// A composite's fields only shape FTI's HDF5 output, which is not provided:
// the type is stored as its bytes. The ids are still checked.
extern "C" int FTI_AddScalarField(fti_id_t id, const char*, fti_id_t fid, size_t) {
  return TypeSize(id) > 0 && TypeSize(fid) > 0 ? FTI_SCES : FTI_NSCS;
}
extern "C" int FTI_AddVectorField(fti_id_t id, const char*, fti_id_t tid, size_t, int ndims, int*) {
  return TypeSize(id) > 0 && TypeSize(tid) > 0 && ndims > 0 ? FTI_SCES : FTI_NSCS;
}

extern "C" int FTI_Protect(int id, void* ptr, int64_t count, fti_id_t tid) {
  if (!Ready("FTI_Protect")) return FTI_NSCS;
  const size_t each = TypeSize(tid);
  if (each == 0 || count < 0 || id < 0 || id >= kSnapshotRegion) {
    Print(FTI_WARN, "FTI_Protect: dataset %d: %s", id,
          each == 0 ? "unknown type id (use a predefined type or FTI_InitType)"
          : count < 0 ? "negative count" : "the id must be from 0 to 2147483631");
    return FTI_NSCS;
  }
  const int64_t bytes = count * static_cast<int64_t>(each);
  if (cairn_protect(g->client, id, ptr, static_cast<size_t>(bytes)) != CAIRN_OK) {
    return Fail("FTI_Protect");
  }
  Dataset& d = g->data[id];  // its attributes stay
  d.ptr = ptr;
  d.bytes = bytes;
  return FTI_SCES;
}

extern "C" int64_t FTI_GetStoredSize(int id) {
  if (!Ready("FTI_GetStoredSize")) return 0;
  if (g->reco) {
    size_t bytes = 0;
    if (cairn_saved_region_size(g->client, kName, g->found, g->rank, id, &bytes) == CAIRN_OK) {
      return static_cast<int64_t>(bytes);
    }
  }
  auto it = g->data.find(id);
  return it == g->data.end() ? 0 : it->second.bytes;
}

extern "C" void* FTI_Realloc(int id, void* ptr) {
  bool done = false;
  return Realloc(id, ptr, &done);
}

// For the Fortran module fti: FTI_Realloc, saying whether it reallocated
// (FTI_SCES, *ptr and *bytes updated) or not (FTI_NSCS, nothing changed).
// Exported (FTI_*) but not declared in fti.h, as FTI_Init_fort_wrapper.
extern "C" FTI_EXPORT int FTI_Realloc_fort_wrapper(int id, void** ptr, int64_t* bytes) {
  if (ptr == nullptr || bytes == nullptr) return FTI_NSCS;
  bool done = false;
  void* moved = Realloc(id, *ptr, &done);
  if (!done) return FTI_NSCS;
  *ptr = moved;
  *bytes = FTI_GetStoredSize(id);
  return FTI_SCES;
}

extern "C" int FTI_SetAttribute(int id, FTIT_attribute attribute, FTIT_attributeFlag flag) {
  if (!Ready("FTI_SetAttribute")) return FTI_NSCS;
  auto it = g->data.find(id);
  if (it == g->data.end()) {
    Print(FTI_WARN, "FTI_SetAttribute: dataset %d is not protected (FTI_Protect it first)", id);
    return FTI_NSCS;
  }
  const int f = static_cast<int>(flag);
  if ((f & FTI_ATTRIBUTE_DIM) != 0 && (attribute.dim.ndims < 1 || attribute.dim.ndims > FTI_HDF5_MAX_DIM)) {
    Print(FTI_WARN, "FTI_SetAttribute: dataset %d: ndims = %d, it must be 1 to %d", id, attribute.dim.ndims,
          FTI_HDF5_MAX_DIM);
    return FTI_NSCS;
  }
  if ((f & FTI_ATTRIBUTE_NAME) != 0) {
    it->second.name.assign(attribute.name, strnlen(attribute.name, sizeof attribute.name));
  }
  if ((f & FTI_ATTRIBUTE_DIM) != 0) {
    it->second.dims.assign(attribute.dim.count, attribute.dim.count + attribute.dim.ndims);
  }
  return FTI_SCES;
}

extern "C" int FTI_Checkpoint(int id, int level) {
  if (!Ready("FTI_Checkpoint")) return FTI_NSCS;
  if (level < FTI_MIN_LEVEL_ID || level > FTI_MAX_LEVEL_ID) {
    Print(FTI_WARN, "FTI_Checkpoint: invalid level %d (1-4, or 5-8 for dCP)", level);
    return FTI_NSCS;
  }
  if (level > FTI_L4) level -= 4;  // dCP: Cairn's change detection (enable_dcp) applies to every level
  if ((level == 2 && !g->l2) || (level == 3 && !g->l3)) {
    Print(FTI_WARN, "FTI_Checkpoint: level %d %s", level,
          level == 2 ? "(partner copy) needs ranks on at least two nodes (node_size)"
                     : "(parity) needs group_size >= 2 nodes and at most the number of nodes");
    return FTI_NSCS;
  }
  if (id < 0) {
    Print(FTI_WARN, "FTI_Checkpoint: checkpoint id %d is negative", id);
    return FTI_NSCS;
  }
  // Local: one rank's failure must still reach the collective wait, which
  // then fails on every rank (it names the rank that never checkpointed).
  // The version's number is agreed without a message: every rank counts the
  // same checkpoints (compat/peer_version.hpp).
  cairn::Client& client = *cairn::FromCHandle(g->client);
  cairn::Result<int64_t> version = g->versions.Next(client, kName, id);
  if (!version.ok()) {
    Print(FTI_EROR, "FTI_Checkpoint: checkpoint %d failed: %s", id, version.status().message().c_str());
    return FTI_NSCS;
  }
  const int64_t v = *version;
  const int err = cairn_checkpoint(g->client, kName, v);
  if (err != CAIRN_OK) Print(FTI_EROR, "FTI_Checkpoint: checkpoint %d failed: %s", id, cairn_last_error());
  cairn::Status w;
  if (level == 1 || level == 4) {
    if (cairn_wait(g->client, kName, v, level == 4 ? CAIRN_LEVEL_PERSISTENT : CAIRN_LEVEL_LOCAL) != CAIRN_OK) {
      w = cairn::Status::Io(cairn_last_error());
    }
  } else {
    w = cairn::WaitAtLevels(client, kName, v, cairn::WaitLevels{.l2 = level == 2, .l3 = level == 3});
  }
  if (!w.ok()) {
    if (err == CAIRN_OK) Print(FTI_EROR, "FTI_Checkpoint: checkpoint %d at level %d failed: %s", id, level, w.message().c_str());
    return FTI_NSCS;
  }
  if (err != CAIRN_OK) return FTI_NSCS;
  g->last = v;
  g->last_level = level;
  if (g->snap.next_id <= id) g->snap.next_id = static_cast<int64_t>(id) + 1;
  Print(FTI_INFO, "Ckpt. ID %d taken (L%d)", id, level);
  return FTI_DONE;
}

extern "C" int FTI_Recover(void) {
  if (!Ready("FTI_Recover")) return FTI_NSCS;
  if (!g->reco) {
    Print(FTI_WARN, "FTI_Recover: there is no checkpoint to recover");
    return FTI_NREC;
  }
  int64_t v = -1;
  if (cairn_restore_latest(g->client, kName, &v) != CAIRN_OK) {
    Print(FTI_EROR, "FTI_Recover: %s", cairn_last_error());
    return FTI_NREC;
  }
  Recovered(g.get(), v);
  Print(FTI_INFO, "Recovered from checkpoint %d", cairn::compat::PeerId(v));
  return FTI_SCES;
}

extern "C" int FTI_RecoverVarInit(void) {
  if (!Ready("FTI_RecoverVarInit")) return FTI_NSCS;
  if (!g->reco) return FTI_SCES;  // not a restart: nothing to do (as FTI)
  // The schedule of FTI_Snapshot travels with the datasets; read aside, so
  // that a failed read leaves the current one whole.
  SnapshotState snap;
  const int rc = ReadStored(g.get(), "FTI_RecoverVarInit", kSnapshotRegion, &snap, sizeof snap);
  if (rc == FTI_SCES) g->snap = snap;
  return rc;
}

extern "C" int FTI_RecoverVar(int id) {
  if (!Ready("FTI_RecoverVar")) return FTI_NSCS;
  if (!g->reco) {
    Print(FTI_WARN, "FTI_RecoverVar: there is no checkpoint to recover");
    return FTI_NREC;
  }
  auto it = g->data.find(id);
  if (it == g->data.end()) {
    Print(FTI_WARN, "FTI_RecoverVar: dataset %d is not protected (FTI_Protect it first)", id);
    return FTI_NSCS;
  }
  size_t stored = 0;
  if (cairn_saved_region_size(g->client, kName, g->found, g->rank, id, &stored) != CAIRN_OK) {
    Print(FTI_EROR, "FTI_RecoverVar: dataset %d of checkpoint %d: %s", id, cairn::compat::PeerId(g->found),
          cairn_last_error());
    return FTI_NSCS;
  }
  const Dataset& d = it->second;
  if (static_cast<int64_t>(stored) != d.bytes) {
    Print(FTI_WARN, "FTI_RecoverVar: dataset %d is protected with %lld bytes but checkpoint %d stored %llu "
          "(FTI_GetStoredSize; FTI_Realloc resizes it)", id, static_cast<long long>(d.bytes),
          cairn::compat::PeerId(g->found), static_cast<unsigned long long>(stored));
    return FTI_NSCS;
  }
  if (stored == 0) return FTI_SCES;  // an empty dataset: nothing to read
  return ReadStored(g.get(), "FTI_RecoverVar", id, d.ptr, stored) == FTI_SCES ? FTI_SCES : FTI_NSCS;
}

extern "C" int FTI_RecoverVarFinalize(void) {
  if (!Ready("FTI_RecoverVarFinalize")) return FTI_NSCS;
  if (g->reco) {
    Recovered(g.get(), g->found);
    Print(FTI_INFO, "Recovered datasets of checkpoint %d", cairn::compat::PeerId(g->found));
  }
  return FTI_SCES;
}

extern "C" int FTI_Snapshot(void) {
  if (!Ready("FTI_Snapshot")) return FTI_NSCS;
  if (g->reco) return FTI_Recover();
  Context& c = *g;
  // [cairn] auto_level: Young/Daly's interval (cairn_checkpoint_due, from
  // this client's measured checkpoint and restore costs and the MTBF)
  // decides instead of the fixed ckpt_l1..ckpt_l4; collective, so every rank
  // takes the same decision.
  if (c.config.auto_level > 0) {
    int due = 0;
    if (cairn_checkpoint_due(c.client, kName, &due) != CAIRN_OK) {
      Print(FTI_EROR, "FTI_Snapshot: %s", cairn_last_error());
      return FTI_NSCS;
    }
    if (!due) return FTI_SCES;
    return FTI_Checkpoint(static_cast<int>(c.snap.next_id), c.config.auto_level);
  }
  int64_t count = 0;
  if (c.unit == Unit::kCalls) {
    count = c.snap.count + 1;
  } else {
    // Every rank must take the same decision: the slowest clock decides.
    double elapsed = MPI_Wtime() - c.start;
    MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MIN, c.internal);
    count = c.base + static_cast<int64_t>(elapsed / (c.unit == Unit::kSeconds ? 1.0 : 60.0));
  }
  c.snap.count = count;
  Schedule schedule;
  for (size_t i = 0; i < 4; ++i) {
    schedule.interval[i] = c.config.interval[i];
    schedule.next[i] = c.snap.next[i];
  }
  const int level = schedule.Due(count);
  for (size_t i = 0; i < 4; ++i) c.snap.next[i] = schedule.next[i];
  if (level == 0) return FTI_SCES;
  return FTI_Checkpoint(static_cast<int>(c.snap.next_id), level);
}

extern "C" int FTI_Finalize(void) {
  if (!Ready("FTI_Finalize")) return FTI_NSCS;
  int rc = FTI_SCES;
  // keep_last_ckpt: FTI moves the last checkpoint to the global directory.
  if (g->config.keep_last_ckpt && g->last >= 0 && g->last_level != 4) {
    if (cairn_wait(g->client, kName, g->last, CAIRN_LEVEL_PERSISTENT) != CAIRN_OK) rc = Fail("FTI_Finalize: keeping the last checkpoint");
  }
  if (cairn_close(g->client) != CAIRN_OK) rc = Fail("FTI_Finalize: closing Cairn");
  g->client = nullptr;
  MPI_Comm_free(&g->internal);
  // FTI_COMM_WORLD stays valid until MPI_Finalize: programs use it after
  // FTI_Finalize (a last reduction, a barrier), as FTI allows.
  g.reset();
  g_types.assign(std::begin(kBasicSizes), std::end(kBasicSizes));
  return rc;
}
