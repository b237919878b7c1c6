/* The failure of the peer-program trials (tests/peers/peer_trial.sh), loaded
 * with LD_PRELOAD into VELOC's and FTI's own programs, which stay unchanged.
 *
 * It watches the calls a program makes and reports on stdout, one line each
 * ("kill_point: rank R ..."):
 *   - each checkpoint that succeeds (VELOC_Checkpoint, VELOC_Checkpoint_end,
 *     FTI_Checkpoint, an FTI_Snapshot that returned FTI_DONE): the program's
 *     iteration then, read
 *     from its region 0 (every one of these programs protects its loop
 *     counter `i` as region 0);
 *   - a recovery (VELOC_Restart, VELOC_Restart_end, FTI_Recover, an
 *     FTI_Snapshot that recovered): the iteration it resumes at, from the
 *     same region (for a program without memory regions: below).
 * With PEER_KILL_AFTER=k and PEER_KILL_REDUCES=r it SIGKILLs every rank at
 * the r-th MPI_Allreduce after the k-th checkpoint (counted alike on every
 * rank: no rank waits on a dead one, and nothing depends on timing). Before
 * the kill the newest checkpoint is made durable (VELOC_Checkpoint_wait, on
 * every rank; with PEER_DURABLE=1 after each checkpoint, for a program that
 * aborts by itself; FTI's checkpoints are durable when they return): Cairn's
 * flush runs in the application's process and dies with it, where VELOC's
 * backend process would finish it (docs/veloc.md), and the trial asks that
 * the newest checkpoint taken is the one recovered. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#define FTI_DONE 1 /* fti.h's values, not included: the program's own header decides */
#define FTI_SCES 0
#define VELOC_SUCCESS 0

static int* g_iter;              /* the program's region 0 */
static int g_checkpoints;        /* checkpoints that succeeded */
static long g_reduces;           /* MPI_Allreduce calls since the k-th checkpoint */
static int g_last = -1;          /* the iteration of the newest checkpoint */
static long g_resumes;           /* recoveries reported */
static long g_total;             /* MPI_Allreduce calls */
/* Inside a checkpoint call: the library's own collectives (the FTI shim's
 * check of the result, say) are neither counted nor a kill point, so that
 * the kill always falls between the program's checkpoints, never inside one
 * that may already be committed. */
static int g_inside;

static int Rank(void) {
  int rank = 0, up = 0;
  MPI_Initialized(&up);
  if (up) PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

static void* Next(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (f == NULL) {
    fprintf(stderr, "kill_point: %s not found\n", name);
    _exit(3);
  }
  return f;
}

/* The program's iteration: its region 0, or for a program that protects no
 * memory (VELOC's heatdis_file: the state is in the routed file), the VELOC
 * version of its checkpoint phase, which that program numbers by iteration. */
static int g_phase_version = -1;
static int Iteration(void) { return g_iter != NULL ? *g_iter : g_phase_version; }

static void Checkpointed(void) {
  ++g_checkpoints;
  g_last = Iteration();
  printf("kill_point: rank %d checkpoint %d at iteration %d (reduce %ld)\n", Rank(), g_checkpoints, g_last,
         g_total);
  fflush(stdout);
}

static void Resumed(void) {
  ++g_resumes;
  printf("kill_point: rank %d resumed at iteration %d\n", Rank(), Iteration());
  fflush(stdout);
}

/* The newest checkpoint durable, for VELOC's programs (FTI's: already). */
static void Durable(void) {
  int (*wait)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "VELOC_Checkpoint_wait");
  if (wait != NULL && wait() != VELOC_SUCCESS) {
    fprintf(stderr, "kill_point: VELOC_Checkpoint_wait failed\n");
    _exit(3);
  }
}

int VELOC_Mem_protect(int id, void* ptr, size_t count, size_t base_size) {
  static int (*real)(int, void*, size_t, size_t);
  if (real == NULL) real = (int (*)(int, void*, size_t, size_t))Next("VELOC_Mem_protect");
  if (id == 0) g_iter = (int*)ptr;
  return real(id, ptr, count, base_size);
}

int VELOC_Checkpoint(const char* name, int version) {
  static int (*real)(const char*, int);
  if (real == NULL) real = (int (*)(const char*, int))Next("VELOC_Checkpoint");
  ++g_inside;
  int rc = real(name, version);
  --g_inside;
  if (rc != VELOC_SUCCESS) return rc;
  /* PEER_DURABLE=1: each checkpoint durable before the program goes on, for
   * a program that fails by itself (MPI_Abort on one rank: no collective
   * wait is possible then). */
  const char* durable = getenv("PEER_DURABLE");
  if (durable != NULL && *durable == '1') Durable();
  Checkpointed();
  return rc;
}

int VELOC_Checkpoint_begin(const char* name, int version) {
  static int (*real)(const char*, int);
  if (real == NULL) real = (int (*)(const char*, int))Next("VELOC_Checkpoint_begin");
  g_phase_version = version;
  return real(name, version);
}

int VELOC_Checkpoint_end(int success) {
  static int (*real)(int);
  if (real == NULL) real = (int (*)(int))Next("VELOC_Checkpoint_end");
  ++g_inside;
  int rc = real(success);
  --g_inside;
  if (rc == VELOC_SUCCESS) Checkpointed();
  return rc;
}

int VELOC_Restart_begin(const char* name, int version) {
  static int (*real)(const char*, int);
  if (real == NULL) real = (int (*)(const char*, int))Next("VELOC_Restart_begin");
  g_phase_version = version;
  return real(name, version);
}

int VELOC_Restart_end(int success) {
  static int (*real)(int);
  if (real == NULL) real = (int (*)(int))Next("VELOC_Restart_end");
  int rc = real(success);
  if (rc == VELOC_SUCCESS) Resumed();
  return rc;
}

int VELOC_Restart(const char* name, int version) {
  static int (*real)(const char*, int);
  if (real == NULL) real = (int (*)(const char*, int))Next("VELOC_Restart");
  int rc = real(name, version);
  if (rc == VELOC_SUCCESS) Resumed();
  return rc;
}

int FTI_Protect(int id, void* ptr, int64_t count, int32_t tid) {
  static int (*real)(int, void*, int64_t, int32_t);
  if (real == NULL) real = (int (*)(int, void*, int64_t, int32_t))Next("FTI_Protect");
  if (id == 0) g_iter = (int*)ptr;
  return real(id, ptr, count, tid);
}

int FTI_Checkpoint(int id, int level) {
  static int (*real)(int, int);
  if (real == NULL) real = (int (*)(int, int))Next("FTI_Checkpoint");
  ++g_inside;
  int rc = real(id, level);
  --g_inside;
  if (rc == FTI_DONE) Checkpointed();
  return rc;
}

int FTI_Recover(void) {
  static int (*real)(void);
  if (real == NULL) real = (int (*)(void))Next("FTI_Recover");
  int rc = real();
  if (rc == FTI_SCES) Resumed();
  return rc;
}

int FTI_Snapshot(void) {
  static int (*real)(void);
  static int (*status)(void);
  if (real == NULL) real = (int (*)(void))Next("FTI_Snapshot");
  if (status == NULL) status = (int (*)(void))Next("FTI_Status");
  /* FTI_Snapshot may call FTI_Checkpoint and FTI_Recover through their
   * exported names, and so through the wrappers above: count once. */
  const int restart = status(), before = g_checkpoints;
  const long resumes = g_resumes;
  ++g_inside;
  int rc = real();
  --g_inside;
  if (restart && !status() && g_resumes == resumes) Resumed();
  else if (rc == FTI_DONE && g_checkpoints == before) Checkpointed();
  return rc;
}

/* Each of the program's MPI_Allreduce calls, C or Fortran: the kill, when its
 * turn has come. */
static void KillPoint(void) {
  static int after = -1;
  static long reduces;
  if (after < 0) {
    const char* a = getenv("PEER_KILL_AFTER");
    const char* r = getenv("PEER_KILL_REDUCES");
    after = a != NULL ? atoi(a) : 0;
    reduces = r != NULL ? atol(r) : 0;
  }
  if (after > 0 && g_checkpoints >= after && ++g_reduces > reduces) {
    Durable();
    printf("kill_point: rank %d SIGKILL after checkpoint %d (iteration %d), %ld reduces later\n", Rank(),
           g_checkpoints, g_last, reduces);
    fflush(stdout);
    /* Every rank has made its checkpoint durable and said so before any
     * dies: mpirun kills the others at the first death. */
    PMPI_Barrier(MPI_COMM_WORLD);
    raise(SIGKILL);
  }
  ++g_total;
}

int MPI_Allreduce(const void* in, void* out, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  if (g_inside == 0) KillPoint();
  return PMPI_Allreduce(in, out, count, type, op, comm);
}

/* Fortran's binding (FTI's examples/fheatdis.f90 through `use mpi`) goes to
 * PMPI_Allreduce without the C symbol. */
void mpi_allreduce_(const void* in, void* out, const MPI_Fint* count, const MPI_Fint* type, const MPI_Fint* op,
                    const MPI_Fint* comm, MPI_Fint* ierr) {
  static void (*real)(const void*, void*, const MPI_Fint*, const MPI_Fint*, const MPI_Fint*, const MPI_Fint*,
                      MPI_Fint*);
  if (real == NULL) {
    real = (void (*)(const void*, void*, const MPI_Fint*, const MPI_Fint*, const MPI_Fint*, const MPI_Fint*,
                     MPI_Fint*))Next("mpi_allreduce_");
  }
  if (g_inside == 0) KillPoint();
  real(in, out, count, type, op, comm, ierr);
}

int MPI_Abort(MPI_Comm comm, int code) {
  printf("kill_point: rank %d MPI_Abort after checkpoint %d (iteration %d)\n", Rank(), g_checkpoints, g_last);
  fflush(stdout);
  return PMPI_Abort(comm, code);
}
