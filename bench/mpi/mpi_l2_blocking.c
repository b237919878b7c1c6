/* cairn-bench-l2-blocking: the application's time inside Cairn calls while
 * L2 partner copies move in the background (docs/mpi.md "Partner copies
 * (L2)").
 *
 *   mpirun -np 4 cairn-bench-l2-blocking [MiB per rank, 64] [versions, 5] [work s, 1.5]
 *
 * Two ranks per simulated node (CAIRN_MPI_RANKS_PER_NODE=2: every rank's
 * partner is on the other node; needs an even number of ranks >= 4),
 * CAIRN_L2_EVERY=1, L3 off. Per version each rank changes one byte per page,
 * checkpoints, then "works" for the given seconds with a cairn_stats call
 * every 10 ms (an application that polls, so the copies move while it
 * computes), then makes the collective wait at CAIRN_LEVEL_LOCAL (the copy
 * stored at the partner). Prints, as one JSON line, the median over versions
 * and the largest over ranks of: the checkpoint call, the sum of the
 * stats calls (where the copies' work lands on the application's thread),
 * the longest single stats call, and the wait. Files live under $TMPDIR.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cairn/cairn_mpi.h"
#include "mpi/mpi_bench_util.h"

enum { kFigures = 4, kMaxVersions = 100 };
static const char *const kNames[kFigures] = {"checkpoint_s", "stats_calls_s", "longest_stats_call_s", "wait_s"};

static int g_rank;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* One version: its four figures into f. */
static void one_version(cairn_client_t *c, unsigned char *buf, size_t bytes, int64_t v, double work_s, double *f) {
  for (size_t i = 0; i < bytes; i += 4096) buf[i]++;
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = now();
  int rc = cairn_checkpoint(c, "l2", v);
  if (rc != CAIRN_OK) die("cairn_checkpoint", rc);
  f[0] = now() - t0;
  f[1] = f[2] = 0;
  for (const double end = now() + work_s; now() < end;) {
    cairn_stats_t st = CAIRN_STATS_INIT;
    t0 = now();
    if ((rc = cairn_stats(c, &st)) != CAIRN_OK) die("cairn_stats", rc);
    const double d = now() - t0;
    f[1] += d;
    if (d > f[2]) f[2] = d;
    for (const double until = now() + 0.01; now() < until;) {
    } /* work */
  }
  t0 = now();
  if ((rc = cairn_wait(c, "l2", v, CAIRN_LEVEL_LOCAL)) != CAIRN_OK) die("cairn_wait", rc);
  f[3] = now() - t0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long mib = argc > 1 ? atol(argv[1]) : 64;
  const int versions = argc > 2 ? atoi(argv[2]) : 5;
  const double work_s = argc > 3 ? atof(argv[3]) : 1.5;
  if (size < 4 || size % 2 != 0 || mib <= 0 || versions <= 0 || versions > kMaxVersions || work_s < 0) {
    if (g_rank == 0)
      fprintf(stderr, "usage: mpirun -np N (even, >= 4) %s [MiB per rank] [versions <= %d] [work s]\n", argv[0],
              kMaxVersions);
    MPI_Finalize();
    return 2;
  }
  char root[4096], dir[4200], cmd[4400];
  if (mpi_bench_scratch("cairn-l2-blocking", root, dir) != 0) die("mkdtemp", -1);
  setenv("CAIRN_MPI_RANKS_PER_NODE", "2", 1);
  setenv("CAIRN_L2_EVERY", "1", 1);
  unsetenv("CAIRN_L3_EVERY");
  char cache[64];
  snprintf(cache, sizeof cache, "%ldMiB", 2 * mib + 16);
  setenv("CAIRN_HOST_CACHE", cache, 0);

  const size_t bytes = (size_t)mib << 20;
  unsigned char *buf = malloc(bytes);
  if (buf == NULL) die("malloc", -1);
  for (size_t i = 0; i < bytes; ++i) buf[i] = (unsigned char)(i * 7 + (size_t)g_rank);
  cairn_client_t *c = NULL;
  int rc = cairn_open_mpi(MPI_COMM_WORLD, NULL, &c);
  if (rc != CAIRN_OK) die("cairn_open_mpi", rc);
  if ((rc = cairn_protect(c, 0, buf, bytes)) != CAIRN_OK) die("cairn_protect", rc);
  double fig[kFigures][kMaxVersions];
  for (int v = 0; v < versions; ++v) {
    double f[kFigures];
    one_version(c, buf, bytes, v + 1, work_s, f);
    for (int k = 0; k < kFigures; ++k) fig[k][v] = f[k];
  }
  if ((rc = cairn_close(c)) != CAIRN_OK) die("cairn_close", rc);
  double mine[kFigures], worst[kFigures];
  for (int k = 0; k < kFigures; ++k) mine[k] = median(fig[k], versions);
  MPI_Reduce(mine, worst, kFigures, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (g_rank == 0) {
    printf("{\"ranks\": %d, \"bytes_per_rank\": %zu, \"versions\": %d, \"work_s\": %.3f", size, bytes, versions, work_s);
    for (int k = 0; k < kFigures; ++k) printf(", \"%s\": %.4f", kNames[k], worst[k]);
    printf("}\n");
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
