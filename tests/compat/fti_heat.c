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
 * drives it). On a restart rank 0 prints "resumed at iteration i". At the end
 * rank 0 writes a digest of the whole grid to the result file: an
 * uninterrupted run and a killed-and-resumed one must write the same. Exit
 * code 2 when FTI_Init fails (the bad-configuration tests). */
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
            level = env_int("FTI_HEAT_LEVEL", 1), stop_at = env_int("FTI_HEAT_STOP_AT", -1);
  int rank, nprocs;
  MPI_Comm_rank(FTI_COMM_WORLD, &rank);
  MPI_Comm_size(FTI_COMM_WORLD, &nprocs);
  const size_t cells = (size_t)(kRowsPerRank + 2) * kCols;
  double *h = calloc(cells, sizeof(double)), *g = calloc(cells, sizeof(double));
  /* The heat source: the first row of the whole grid (rank 0's halo). */
  if (rank == 0) for (int c = 0; c < kCols; ++c) h[c] = 100.0;
  int i = 0, resumed = -1;
  FTI_Protect(0, &i, 1, FTI_INTG);
  FTI_Protect(1, h, (int64_t)cells, FTI_DBLE);
  if (FTI_Status() != 0) {
    if (FTI_Recover() != FTI_SCES) {
      fprintf(stderr, "rank %d: FTI_Recover failed\n", rank);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    resumed = i;
    if (rank == 0) printf("resumed at iteration %d\n", i);
  }
  for (; i < iterations; ++i) {
    if (every > 0 && i > 0 && i % every == 0 && i != resumed) { /* not again after a restart */
      if (FTI_Checkpoint(i, level) != FTI_DONE) MPI_Abort(MPI_COMM_WORLD, 4);
    } else if (every == 0 && FTI_Snapshot() < 0) {
      MPI_Abort(MPI_COMM_WORLD, 4);
    }
    step(h, g, rank, nprocs);
    if (i == stop_at) {
      fflush(stdout);
      _exit(0); /* a crash: no FTI_Finalize, no MPI_Finalize */
    }
  }
  /* A digest of the whole grid: its bytes, rank by rank. */
  uint64_t digest = 1469598103934665603ull;
  const unsigned char *p = (const unsigned char *)(h + kCols);
  for (size_t b = 0; b < sizeof(double) * kRowsPerRank * kCols; ++b) digest = (digest ^ p[b]) * 1099511628211ull;
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
  MPI_Finalize();
  return 0;
}
