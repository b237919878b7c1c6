/* fti_levels: an application written for FTI that protects one buffer and
 * checkpoints it at level 2 and level 3 in turn (FTI's own levels: L2 =
 * local + partner copy, L3 = local + the set's Reed-Solomon encoding),
 * computing between checkpoints; built unchanged against FTI 1.6 and
 * against libcairn_fti by bench/peers/fti_side_by_side.sh. Prints, as one
 * JSON line from rank 0, the job's blocking (the slowest rank's time inside
 * FTI_Checkpoint) of each checkpoint and the medians.
 *
 *   mpirun -np N fti_levels CONFIG MIB CHECKPOINTS INTERVAL_S
 *
 * Computing is one byte written per page of the buffer, round after round,
 * until INTERVAL_S has passed (as cairn-bench-mpi --levels computes). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fti.h"

static int cmp(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
static double median(const double *v, int n) {
  double s[256];
  memcpy(s, v, sizeof(double) * (size_t)n);
  qsort(s, (size_t)n, sizeof(double), cmp);
  return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  if (argc != 5) {
    fprintf(stderr, "usage: %s CONFIG MIB CHECKPOINTS INTERVAL_S\n", argv[0]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const size_t bytes = (size_t)atol(argv[2]) << 20;
  const int n = atoi(argv[3]);
  const double interval = atof(argv[4]);
  if (bytes == 0 || n <= 0 || n > 256 || interval < 0) MPI_Abort(MPI_COMM_WORLD, 2);
  if (FTI_Init(argv[1], MPI_COMM_WORLD) != FTI_SCES) MPI_Abort(MPI_COMM_WORLD, 1);
  int rank = 0;
  MPI_Comm_rank(FTI_COMM_WORLD, &rank);
  unsigned char *buf = malloc(bytes);
  if (buf == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  for (size_t i = 0; i < bytes; ++i) buf[i] = (unsigned char)(i * 31 + (size_t)rank);
  FTI_Protect(0, buf, (int64_t)bytes, FTI_CHAR);
  double blocking[256], l2[128], l3[128];
  int n2 = 0, n3 = 0;
  unsigned char round = 0;
  for (int c = 1; c <= n; ++c) {
    const double until = MPI_Wtime() + interval;
    while (MPI_Wtime() < until) {
      ++round;
      for (size_t i = 0; i < bytes && MPI_Wtime() < until; i += 4096) buf[i] = round;
    }
    const int level = c % 2 == 1 ? 2 : 3;
    MPI_Barrier(FTI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    const int rc = FTI_Checkpoint(c, level);
    double mine = MPI_Wtime() - t0, job = 0;
    if (rc != FTI_DONE && rc != FTI_SCES) {
      fprintf(stderr, "rank %d: FTI_Checkpoint(%d, %d) returned %d\n", rank, c, level, rc);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Allreduce(&mine, &job, 1, MPI_DOUBLE, MPI_MAX, FTI_COMM_WORLD);
    blocking[c - 1] = job;
    if (level == 2) l2[n2++] = job;
    else l3[n3++] = job;
  }
  if (rank == 0) {
    printf("{\"mib\": %zu, \"checkpoints\": %d, \"interval_s\": %g, \"blocking_s\": %.6f, \"l2_blocking_s\": %.6f, "
           "\"l3_blocking_s\": %.6f, \"each_s\": [",
           bytes >> 20, n, interval, median(blocking, n), median(l2, n2), median(l3, n3));
    for (int c = 0; c < n; ++c) printf("%s%.6f", c ? ", " : "", blocking[c]);
    printf("]}\n");
  }
  FTI_Finalize();
  free(buf);
  MPI_Finalize();
  return 0;
}
