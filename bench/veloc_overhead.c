/* The cost of VELOC's API over Cairn (issue 18, docs/veloc.md "Overhead"):
 * application blocking per checkpoint of a heat-like program through
 * libcairn_veloc in async mode against Cairn's native C API, in one run.
 *
 *   mpirun -np 2 cairn-bench-veloc <dir> [MiB per rank = 1024] [checkpoints = 8]
 *          [rounds = 2] [compute ms between checkpoints = 0]
 *
 * Both sides do the same thing per checkpoint: wait for the previous version
 * at the persistent level, then capture the next (VELOC_Checkpoint is
 * VELOC_Checkpoint_wait + begin + mem + end; natively cairn_wait +
 * cairn_checkpoint). Between checkpoints every page of the state is written
 * (and, with a compute time, rewritten until it has passed), so both capture
 * the same changed data. Each round runs the native side then the VELOC side,
 * on the same Cairn configuration (<dir>/cairn.toml, which VELOC's file names
 * with cairn_config), in their own directories. Blocking is the slowest
 * rank's per checkpoint; the first checkpoint of each side is left out
 * (nothing to wait for). rank 0 prints one JSON line. Everything is written
 * in a fresh <dir>/run.XXXXXX, removed at the end.
 */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <veloc.h>

#include "cairn/cairn_mpi.h"

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void compute(double *state, size_t n, double ms, int step) {
  const double until = MPI_Wtime() + ms / 1000.0;
  do {
    for (size_t i = 0; i < n; i += 512) state[i] += 1.0 + step; /* every 4 KiB page */
  } while (MPI_Wtime() < until);
}

static void die(const char *what, int rc) {
  fprintf(stderr, "cairn-bench-veloc: %s failed (%d): %s\n", what, rc, cairn_last_error());
  MPI_Abort(MPI_COMM_WORLD, 2);
}

/* One side, `count` checkpoints: the slowest rank's blocking (s) of each
 * checkpoint after the first into out[]. */
static void run_native(const char *toml, double *state, size_t n, int count, double ms, double *out) {
  cairn_client_t *c = NULL;
  int rc = cairn_open_mpi(MPI_COMM_WORLD, toml, &c);
  if (rc != 0) die("cairn_open_mpi", rc);
  if ((rc = cairn_protect(c, 1, state, n * sizeof(double))) != 0) die("cairn_protect", rc);
  for (int k = 1; k <= count; ++k) {
    compute(state, n, ms, k);
    double t0 = MPI_Wtime();
    if (k > 1 && (rc = cairn_wait(c, "native", k - 1, CAIRN_LEVEL_PERSISTENT)) != 0) die("cairn_wait", rc);
    if ((rc = cairn_checkpoint(c, "native", k)) != 0) die("cairn_checkpoint", rc);
    double t = MPI_Wtime() - t0, slowest;
    MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (k > 1) out[k - 2] = slowest;
  }
  if ((rc = cairn_wait(c, "native", count, CAIRN_LEVEL_PERSISTENT)) != 0) die("cairn_wait", rc);
  if ((rc = cairn_close(c)) != 0) die("cairn_close", rc);
}

static void run_veloc(const char *cfg, double *state, size_t n, int count, double ms, double *out) {
  if (VELOC_Init(MPI_COMM_WORLD, cfg) != VELOC_SUCCESS) die("VELOC_Init", -1);
  if (VELOC_Mem_protect(1, state, n, sizeof(double)) != VELOC_SUCCESS) die("VELOC_Mem_protect", -1);
  for (int k = 1; k <= count; ++k) {
    compute(state, n, ms, k);
    double t0 = MPI_Wtime();
    if (VELOC_Checkpoint("veloc", k) != VELOC_SUCCESS) die("VELOC_Checkpoint", -1);
    double t = MPI_Wtime() - t0, slowest;
    MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (k > 1) out[k - 2] = slowest;
  }
  if (VELOC_Finalize(1) != VELOC_SUCCESS) die("VELOC_Finalize", -1);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double mean(const double *v, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += v[i];
  return s / n;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 2) {
    if (rank == 0) fprintf(stderr, "usage: %s <dir> [MiB per rank] [checkpoints] [rounds] [compute ms]\n", argv[0]);
    MPI_Finalize();
    return 1;
  }
  /* rank 0 makes the run's directory and tells the others its name. */
  char dir[3000] = "";
  if (rank == 0) {
    snprintf(dir, sizeof dir, "%s/run.XXXXXX", argv[1]);
    if (mkdtemp(dir) == NULL) die("mkdtemp under the directory given", -1);
  }
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  const long mib = argc > 2 ? atol(argv[2]) : 1024;
  const int count = argc > 3 ? atoi(argv[3]) : 8;
  const int rounds = argc > 4 ? atoi(argv[4]) : 2;
  const double ms = argc > 5 ? atof(argv[5]) : 0;
  if (mib <= 0 || count < 2 || rounds < 1 || ms < 0) {
    if (rank == 0) fprintf(stderr, "cairn-bench-veloc: need MiB > 0, checkpoints >= 2, rounds >= 1, compute ms >= 0\n");
    MPI_Finalize();
    return 1;
  }
  char toml[4096], cfg[4096];
  snprintf(toml, sizeof toml, "%s/cairn.toml", dir);
  snprintf(cfg, sizeof cfg, "%s/veloc.cfg", dir);
  if (rank == 0) {
    /* A host cache that holds two versions: the capture never waits for
     * space, so blocking is the capture plus the wait for the previous one. */
    FILE *f = fopen(toml, "w");
    if (f == NULL) die("writing cairn.toml", -1);
    fprintf(f, "[storage]\nscratch = \"%s/native-scratch\"\npersistent = \"%s/native-persistent\"\n"
               "[host_cache]\nsize = \"%ld MiB\"\n[retention]\nkeep_versions = 2\n", dir, dir, 2 * mib + 8);
    fclose(f);
    f = fopen(cfg, "w");
    if (f == NULL) die("writing veloc.cfg", -1);
    fprintf(f, "scratch = %s/veloc-scratch\npersistent = %s/veloc-persistent\nmode = async\n"
               "max_versions = 2\ncairn_config = %s\n", dir, dir, toml);
    fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  const size_t n = (size_t)mib * 1024 * 1024 / sizeof(double);
  double *state = malloc(n * sizeof(double));
  if (state == NULL) die("malloc", -1);
  for (size_t i = 0; i < n; ++i) state[i] = (double)(i % 1000) + rank;
  const int per = count - 1;
  double *native = malloc(sizeof(double) * (size_t)(per * rounds));
  double *veloc = malloc(sizeof(double) * (size_t)(per * rounds));
  for (int r = 0; r < rounds; ++r) {
    run_native(toml, state, n, count, ms, native + r * per);
    run_veloc(cfg, state, n, count, ms, veloc + r * per);
  }
  if (rank == 0) {
    const int all = per * rounds;
    const double nm = mean(native, all), vm = mean(veloc, all);
    const double nmed = median(native, all), vmed = median(veloc, all);
    printf("{\"ranks\": %d, \"mib_per_rank\": %ld, \"checkpoints\": %d, \"rounds\": %d, \"compute_ms\": %g, "
           "\"native_block_ms_median\": %.3f, \"veloc_block_ms_median\": %.3f, "
           "\"native_block_ms_mean\": %.3f, \"veloc_block_ms_mean\": %.3f, \"veloc_overhead_pct\": %.2f}\n",
           size, mib, count, rounds, ms, nmed * 1e3, vmed * 1e3, nm * 1e3, vm * 1e3, (vmed / nmed - 1) * 100);
  }
  free(native);
  free(veloc);
  free(state);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  MPI_Finalize();
  return 0;
}
