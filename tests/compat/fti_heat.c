/* A heat-distribution program written against FTI's API (include/fti.h),
 * like FTI's own examples/hd.c: a 1-D decomposition of a 2-D grid, Jacobi
 * iterations with halo exchange on FTI_COMM_WORLD, the grid and the iteration
 * protected, a checkpoint every FTI_HEAT_EVERY iterations at level
 * FTI_HEAT_LEVEL (or FTI_Snapshot at every iteration when FTI_HEAT_EVERY=0).
 *
 *   fti_heat <config.fti> <iterations> <result file>
 *
 * FTI_HEAT_STOP_AT=k: after iteration k every rank exits at once, without
 * FTI_Finalize nor MPI_Finalize (a crash, as tests/compat/fti_heat_test.sh
 * drives it). With FTI_HEAT_STOP_AFTER_CKPT=1 it exits after the first
 * iteration >= k at which FTI_Snapshot checkpointed (automatic intervals:
 * when that happens depends on time, the kill must still follow a
 * checkpoint); rank 0 prints "stopped after the checkpoint at iteration i",
 * also into the file FTI_HEAT_STOP_REPORT names.
 * On a restart rank 0 prints "resumed at iteration i".
 *
 * FTI_HEAT_RECOVER=var: the restart recovers with FTI_RecoverVarInit /
 * FTI_RecoverVar / FTI_RecoverVarFinalize, and only datasets 0 and 1: dataset
 * 2 (the launch number, 1 in the first run, 2 after a restart) is protected
 * and checkpointed too but must keep this launch's value.
 * FTI_HEAT_REALLOC=1: dataset 3 is a history whose length grows by one value
 * at every checkpoint (its size depends on the checkpoint); a restart
 * allocates one element, FTI_Realloc gives it the stored size, then it is
 * recovered. The history is part of the digest.
 *
 * At the end rank 0 writes a digest of the whole grid to the result file: an
 * uninterrupted run and a killed-and-resumed one must write the same. Exit
 * code 2 when FTI_Init fails (the bad-configuration tests), 3 when the
 * recovery fails or breaks its contract. */
#include <fti.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { kCols = 64, kRowsPerRank = 16 };

static int env_int(const char *name, int dflt) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : dflt;
}

static void check(int ok, int rank, const char *what) {
  if (ok) return;
  fprintf(stderr, "rank %d: %s\n", rank, what);
  MPI_Abort(MPI_COMM_WORLD, 3);
}

/* FTI_HEAT_RECOVER=var: datasets 0 and 1 one by one (FTI's RecoverVar
 * protocol); dataset 2 is left alone. Also the errors of the calls. */
static void recover_var(int rank) {
  check(FTI_RecoverVarInit() == FTI_SCES, rank, "FTI_RecoverVarInit failed");
  check(FTI_RecoverVar(7) == FTI_NSCS, rank, "FTI_RecoverVar of an unprotected dataset did not fail");
  check(FTI_RecoverVar(1) == FTI_SCES && FTI_RecoverVar(0) == FTI_SCES, rank, "FTI_RecoverVar failed");
  check(FTI_Status() == 1, rank, "FTI_Status is not 1 before FTI_RecoverVarFinalize");
  check(FTI_RecoverVarFinalize() == FTI_SCES, rank, "FTI_RecoverVarFinalize failed");
  check(FTI_Status() == 0, rank, "FTI_Status is not 0 after FTI_RecoverVarFinalize");
}

/* FTI_HEAT_RECOVER=var also names and shapes the grid (FTI_SetAttribute):
 * accepted for a protected dataset, refused for another or bad dimensions. */
static void set_attributes(int rank, int nprocs) {
  FTIT_attribute a;
  memset(&a, 0, sizeof a);
  strcpy(a.name, "temperature");
  a.dim.ndims = 2;
  a.dim.count[0] = kCols;
  a.dim.count[1] = (FTIT_hsize_t)(kRowsPerRank + 2) * (FTIT_hsize_t)nprocs;
  check(FTI_SetAttribute(1, a, (FTIT_attributeFlag)(FTI_ATTRIBUTE_NAME | FTI_ATTRIBUTE_DIM)) == FTI_SCES, rank,
        "FTI_SetAttribute of the grid failed");
  check(FTI_SetAttribute(7, a, FTI_ATTRIBUTE_NAME) == FTI_NSCS, rank,
        "FTI_SetAttribute of an unprotected dataset did not fail");
  a.dim.ndims = 0;
  check(FTI_SetAttribute(1, a, FTI_ATTRIBUTE_DIM) == FTI_NSCS, rank, "FTI_SetAttribute with 0 dimensions did not fail");
}

/* FTI_HEAT_REALLOC=1 on a restart: the history gets its stored size. */
static double *realloc_history(double *hist, int *nhist, int rank) {
  const int64_t stored = FTI_GetStoredSize(3);
  check(stored > 0 && stored % (int64_t)sizeof(double) == 0, rank, "FTI_GetStoredSize(3) is not a history size");
  check(FTI_Realloc(99, hist) == hist, rank, "FTI_Realloc of an unprotected dataset did not return ptr");
  hist = FTI_Realloc(3, hist);
  check(hist != NULL, rank, "FTI_Realloc returned NULL");
  *nhist = (int)(stored / (int64_t)sizeof(double));
  check(FTI_GetStoredSize(3) == stored, rank, "FTI_GetStoredSize(3) changed after FTI_Realloc");
  return hist;
}

/* One Jacobi step; the halo rows come from the neighbours. */
static void step(double *h, double *g, int rank, int nprocs) {
  MPI_Request req[4];
  int n = 0;
  double *top = h, *bottom = h + (kRowsPerRank + 1) * kCols;
  if (rank > 0) {
    MPI_Isend(h + kCols, kCols, MPI_DOUBLE, rank - 1, 1, FTI_COMM_WORLD, &req[n++]);
    MPI_Irecv(top, kCols, MPI_DOUBLE, rank - 1, 2, FTI_COMM_WORLD, &req[n++]);
  }
  if (rank < nprocs - 1) {
    MPI_Isend(h + kRowsPerRank * kCols, kCols, MPI_DOUBLE, rank + 1, 2, FTI_COMM_WORLD, &req[n++]);
    MPI_Irecv(bottom, kCols, MPI_DOUBLE, rank + 1, 1, FTI_COMM_WORLD, &req[n++]);
  }
  MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
  for (int r = 1; r <= kRowsPerRank; ++r) {
    for (int c = 0; c < kCols; ++c) {
      const double left = c > 0 ? h[r * kCols + c - 1] : h[r * kCols + c];
      const double right = c < kCols - 1 ? h[r * kCols + c + 1] : h[r * kCols + c];
      g[r * kCols + c] = 0.25 * (h[(r - 1) * kCols + c] + h[(r + 1) * kCols + c] + left + right);
    }
  }
  memcpy(h + kCols, g + kCols, sizeof(double) * kRowsPerRank * kCols);
}

/* FTI_HEAT_STOP_REPORT names the file for "stopped after the checkpoint at
 * iteration i" (and stdout gets it too). */
static void report_stop(int i) {
  printf("stopped after the checkpoint at iteration %d\n", i);
  const char *path = getenv("FTI_HEAT_STOP_REPORT");
  FILE *f = path != NULL ? fopen(path, "w") : NULL;
  if (f != NULL) {
    fprintf(f, "stopped after the checkpoint at iteration %d\n", i);
    fclose(f);
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  if (argc != 4) {
    fprintf(stderr, "usage: fti_heat <config.fti> <iterations> <result file>\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (FTI_Init(argv[1], MPI_COMM_WORLD) != FTI_SCES) {
    MPI_Finalize();
    return 2;
  }
  const int iterations = atoi(argv[2]), every = env_int("FTI_HEAT_EVERY", 5),
            level = env_int("FTI_HEAT_LEVEL", 1), stop_at = env_int("FTI_HEAT_STOP_AT", -1),
            stop_after_ckpt = env_int("FTI_HEAT_STOP_AFTER_CKPT", 0), use_realloc = env_int("FTI_HEAT_REALLOC", 0);
  const char *recover = getenv("FTI_HEAT_RECOVER");
  const int by_var = recover != NULL && strcmp(recover, "var") == 0;
  int rank, nprocs;
  MPI_Comm_rank(FTI_COMM_WORLD, &rank);
  MPI_Comm_size(FTI_COMM_WORLD, &nprocs);
  const size_t cells = (size_t)(kRowsPerRank + 2) * kCols;
  double *h = calloc(cells, sizeof(double)), *g = calloc(cells, sizeof(double));
  /* The heat source: the first row of the whole grid (rank 0's halo). */
  if (rank == 0) for (int c = 0; c < kCols; ++c) h[c] = 100.0;
  int i = 0, resumed = -1, launch = FTI_Status() != 0 ? 2 : 1, nhist = 1;
  double *hist = calloc(1, sizeof(double));
  FTI_Protect(0, &i, 1, FTI_INTG);
  FTI_Protect(1, h, (int64_t)cells, FTI_DBLE);
  if (by_var) {
    FTI_Protect(2, &launch, 1, FTI_INTG);
    set_attributes(rank, nprocs);
  }
  if (use_realloc) FTI_Protect(3, hist, nhist, FTI_DBLE);
  if (FTI_Status() != 0) {
    if (use_realloc) hist = realloc_history(hist, &nhist, rank);
    if (by_var) {
      recover_var(rank);
      check(launch == 2, rank, "FTI_RecoverVar restored dataset 2, which was not asked for");
    } else {
      check(FTI_Recover() == FTI_SCES, rank, "FTI_Recover failed");
    }
    resumed = i;
    if (rank == 0) printf("resumed at iteration %d\n", i);
  }
  for (; i < iterations; ++i) {
    int done = 0;
    if (every > 0 && i > 0 && i % every == 0 && i != resumed) { /* not again after a restart */
      if (use_realloc) { /* the history grows by one value per checkpoint */
        hist = realloc(hist, sizeof(double) * (size_t)(nhist + 1));
        hist[nhist++] = h[kCols + 1];
        FTI_Protect(3, hist, nhist, FTI_DBLE);
      }
      if (FTI_Checkpoint(i, level) != FTI_DONE) MPI_Abort(MPI_COMM_WORLD, 4);
    } else if (every == 0) {
      done = FTI_Snapshot();
      if (done < 0) MPI_Abort(MPI_COMM_WORLD, 4);
    }
    step(h, g, rank, nprocs);
    if (stop_at >= 0 && (stop_after_ckpt ? i >= stop_at && done == FTI_DONE : i == stop_at)) {
      if (stop_after_ckpt) {
        /* The decision is collective (every rank stops at this i). Rank 0
         * says where in a file, and no rank exits before it has: the first
         * rank to exit makes mpiexec end the job, whatever stdout still holds. */
        if (rank == 0) report_stop(i);
        MPI_Barrier(FTI_COMM_WORLD);
      }
      fflush(stdout);
      _exit(0); /* a crash: no FTI_Finalize, no MPI_Finalize */
    }
  }
  /* A digest of the whole grid: its bytes, rank by rank. */
  uint64_t digest = 1469598103934665603ull;
  const unsigned char *p = (const unsigned char *)(h + kCols);
  for (size_t b = 0; b < sizeof(double) * kRowsPerRank * kCols; ++b) digest = (digest ^ p[b]) * 1099511628211ull;
  p = (const unsigned char *)hist; /* FTI_HEAT_REALLOC: the history too (else one 0) */
  for (size_t b = 0; b < sizeof(double) * (size_t)nhist; ++b) digest = (digest ^ p[b]) * 1099511628211ull;
  uint64_t *all = malloc(sizeof(uint64_t) * (size_t)nprocs);
  MPI_Gather(&digest, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, FTI_COMM_WORLD);
  if (rank == 0) {
    FILE *f = fopen(argv[3], "w");
    for (int r = 0; r < nprocs; ++r) fprintf(f, "%016llx\n", (unsigned long long)all[r]);
    fclose(f);
  }
  free(all);
  FTI_Finalize();
  MPI_Barrier(FTI_COMM_WORLD); /* still valid after FTI_Finalize, as in FTI */
  free(h);
  free(g);
  free(hist);
  MPI_Finalize();
  return 0;
}
