/* The scratch directory of the small MPI benchmarks (mpi_xor_rebuild.c,
 * mpi_l2_blocking.c): one fresh directory under $TMPDIR (default /tmp),
 * made by rank 0 and shared with every rank; CAIRN_SCRATCH is set to its
 * "scratch" subdirectory. Collective. 0 on success (root and scratch
 * filled), -1 when the directory could not be made (on every rank). */
#pragma once

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

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
