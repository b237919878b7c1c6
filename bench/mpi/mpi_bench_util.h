/* What the small MPI benchmarks (mpi_xor_rebuild.c, mpi_l2_blocking.c)
 * share: ending the job on an error, the median of their trials, and their
 * scratch directory. */
#pragma once

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "cairn/cairn_mpi.h"

/* Prints what failed (with rc and Cairn's last error) and ends the job. */
static inline void die(const char *what, int rc) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  fprintf(stderr, "rank %d: %s: %d (%s)\n", rank, what, rc, cairn_last_error());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static inline int mpi_bench_by_value(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
/* The median of v[0..n) (n >= 1); sorts v. */
static inline double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, mpi_bench_by_value);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One fresh directory under $TMPDIR (default /tmp), made by rank 0 and
 * shared with every rank; CAIRN_SCRATCH is set to its "scratch"
 * subdirectory. Collective. 0 on success (root and scratch filled), -1 when
 * the directory could not be made (on every rank). */
static inline int mpi_bench_scratch(const char *stem, char root[4096], char scratch[4200]) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  root[0] = '\0';
  if (rank == 0) {
    const char *tmp = getenv("TMPDIR");
    snprintf(root, 4096, "%s/%s.XXXXXX", tmp && *tmp ? tmp : "/tmp", stem);
    if (mkdtemp(root) == NULL) root[0] = '\0';
  }
  MPI_Bcast(root, 4096, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (root[0] == '\0') return -1;
  snprintf(scratch, 4200, "%s/scratch", root);
  setenv("CAIRN_SCRATCH", scratch, 1);
  return 0;
}
