/* The cost of the drop-in APIs over Cairn (docs/veloc.md and
 * docs/fti.md, "Overhead"): the application's blocking per checkpoint of a
 * heat-like program through libcairn_veloc in async mode and through
 * libcairn_fti at level 1, each against Cairn's native C API doing the same,
 * in one run.
 *
 *   mpirun -np 2 cairn-bench-shims <dir> [MiB per rank = 1024] [checkpoints = 8]
 *          [rounds = 2] [compute ms between checkpoints = 0]
 *
 * Four sides, each doing per checkpoint what its API does:
 *   native_async  cairn_wait(previous, persistent) + cairn_checkpoint
 *   veloc         VELOC_Checkpoint (= Checkpoint_wait + begin + mem + end)
 *   native_l1     cairn_checkpoint + cairn_wait(this one, local)
 *   fti_l1        FTI_Checkpoint(id, 1) (checkpoint, then wait for the local file)
 * Between checkpoints every page of the state is written (and, with a compute
 * time, rewritten until it has passed), so every side captures the same
 * changed data. Every side opens its own client on the same Cairn settings
 * (<dir>/cairn.toml: VELOC's file names it with cairn_config, FTI's open
 * reads it through CAIRN_CONFIG), so each starts with a fresh host cache, and
 * writes in its own directories, removed when it is done (so a tmpfs <dir>
 * holds one side's versions at a time). A round runs the four sides, in reverse
 * order every other round. Blocking is the slowest rank's per checkpoint; the
 * first checkpoint of each side is left out (nothing to wait for yet).
 * rank 0 prints one JSON line. Everything is written in a fresh
 * <dir>/run.XXXXXX, removed at the end.
 */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fti.h>
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
  fprintf(stderr, "cairn-bench-shims: %s failed (%d): %s\n", what, rc, cairn_last_error());
  MPI_Abort(MPI_COMM_WORLD, 2);
}

/* The run's files: Cairn's settings, VELOC's and FTI's configurations. */
static char toml[4096], veloc_cfg[4096], fti_cfg[4096];
static cairn_client_t *native;

static void check(const char *what, int rc) {
  if (rc != 0) die(what, rc);
}

static void native_open(double *state, size_t n) {
  check("cairn_open_mpi", cairn_open_mpi(MPI_COMM_WORLD, toml, &native));
  check("cairn_protect", cairn_protect(native, 1, state, n * sizeof(double)));
}
static void native_close(const char *name, int last) {
  check("cairn_wait", cairn_wait(native, name, last, CAIRN_LEVEL_PERSISTENT));
  check("cairn_close", cairn_close(native));
}
static void native_async_step(int k) {
  if (k > 1) check("cairn_wait", cairn_wait(native, "async", k - 1, CAIRN_LEVEL_PERSISTENT));
  check("cairn_checkpoint", cairn_checkpoint(native, "async", k));
}
static void native_async_close(int last) { native_close("async", last); }
static void native_l1_step(int k) {
  check("cairn_checkpoint", cairn_checkpoint(native, "l1", k));
  check("cairn_wait", cairn_wait(native, "l1", k, CAIRN_LEVEL_LOCAL));
}
static void native_l1_close(int last) { native_close("l1", last); }

static void veloc_open(double *state, size_t n) {
  check("VELOC_Init", VELOC_Init(MPI_COMM_WORLD, veloc_cfg) == VELOC_SUCCESS ? 0 : -1);
  check("VELOC_Mem_protect", VELOC_Mem_protect(1, state, n, sizeof(double)) == VELOC_SUCCESS ? 0 : -1);
}
static void veloc_step(int k) { check("VELOC_Checkpoint", VELOC_Checkpoint("veloc", k) == VELOC_SUCCESS ? 0 : -1); }
static void veloc_close(int last) {
  (void)last;
  check("VELOC_Finalize", VELOC_Finalize(1) == VELOC_SUCCESS ? 0 : -1);
}

static void fti_open(double *state, size_t n) {
  /* FTI_Init opens Cairn with CAIRN_CONFIG's settings under its own. */
  setenv("CAIRN_CONFIG", toml, 1);
  check("FTI_Init", FTI_Init(fti_cfg, MPI_COMM_WORLD) == FTI_SCES ? 0 : -1);
  unsetenv("CAIRN_CONFIG");
  check("FTI_Protect", FTI_Protect(1, state, (int64_t)n, FTI_DBLE) == FTI_SCES ? 0 : -1);
}
static void fti_step(int k) { check("FTI_Checkpoint", FTI_Checkpoint(k, FTI_L1) == FTI_DONE ? 0 : -1); }
static void fti_close(int last) {
  (void)last;
  check("FTI_Finalize", FTI_Finalize() == FTI_SCES ? 0 : -1);
}

struct side {
  const char *name;
  void (*open)(double *state, size_t n);
  void (*step)(int k);
  void (*close)(int last);
  const char *dirs[2]; /* its directories under the run's, removed after it */
};
enum { kSides = 4 };
static const struct side sides[kSides] = {
    {"native_async", native_open, native_async_step, native_async_close, {"native-scratch", "native-persistent"}},
    {"veloc", veloc_open, veloc_step, veloc_close, {"veloc-scratch", "veloc-persistent"}},
    {"native_l1", native_open, native_l1_step, native_l1_close, {"native-scratch", "native-persistent"}},
    {"fti_l1", fti_open, fti_step, fti_close, {"fti-local", "fti-global"}},
};
static char run_dir[3000];

/* One side, `count` checkpoints: the slowest rank's blocking (s) of each
 * checkpoint after the first into out[]. */
static void run_side(const struct side *s, double *state, size_t n, int count, double ms, double *out) {
  s->open(state, n);
  for (int k = 1; k <= count; ++k) {
    compute(state, n, ms, k);
    const double t0 = MPI_Wtime();
    s->step(k);
    double t = MPI_Wtime() - t0, slowest;
    MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (k > 1) out[k - 2] = slowest;
  }
  s->close(count);
  /* Its files go before the next side starts: the run holds one side's
   * versions at a time (a tmpfs directory holds them all in memory). */
  MPI_Barrier(MPI_COMM_WORLD);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (int i = 0; i < 2 && rank == 0; ++i) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", run_dir, s->dirs[i]);
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  }
  MPI_Barrier(MPI_COMM_WORLD);
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

/* rank 0 writes the three configurations into the run's directory. */
static void write_configs(const char *dir, long mib) {
  /* FTI's node_size is the ranks per node: this node's count (collective). */
  MPI_Comm node;
  int node_size;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &node_size);
  MPI_Comm_free(&node);
  snprintf(toml, sizeof toml, "%s/cairn.toml", dir);
  snprintf(veloc_cfg, sizeof veloc_cfg, "%s/veloc.cfg", dir);
  snprintf(fti_cfg, sizeof fti_cfg, "%s/fti.cfg", dir);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return;
  /* A host cache that holds two versions: the capture never waits for
   * space, so blocking is the capture plus the wait its API asks for. */
  FILE *f = fopen(toml, "w");
  if (f == NULL) die("writing cairn.toml", -1);
  fprintf(f, "[storage]\nscratch = \"%s/native-scratch\"\npersistent = \"%s/native-persistent\"\n"
             "[host_cache]\nsize = \"%ld MiB\"\n[retention]\nkeep_versions = 2\n", dir, dir, 2 * mib + 8);
  fclose(f);
  f = fopen(veloc_cfg, "w");
  if (f == NULL) die("writing veloc.cfg", -1);
  fprintf(f, "scratch = %s/veloc-scratch\npersistent = %s/veloc-persistent\nmode = async\n"
             "max_versions = 2\ncairn_config = %s\n", dir, dir, toml);
  fclose(f);
  f = fopen(fti_cfg, "w");
  if (f == NULL) die("writing fti.cfg", -1);
  fprintf(f, "[basic]\nckpt_dir = %s/fti-local\nglbl_dir = %s/fti-global\nnode_size = %d\nverbosity = 3\n", dir,
          dir, node_size);
  fclose(f);
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
  snprintf(run_dir, sizeof run_dir, "%s", dir);
  const long mib = argc > 2 ? atol(argv[2]) : 1024;
  const int count = argc > 3 ? atoi(argv[3]) : 8;
  const int rounds = argc > 4 ? atoi(argv[4]) : 2;
  const double ms = argc > 5 ? atof(argv[5]) : 0;
  if (mib <= 0 || count < 2 || rounds < 1 || ms < 0) {
    if (rank == 0) fprintf(stderr, "cairn-bench-shims: need MiB > 0, checkpoints >= 2, rounds >= 1, compute ms >= 0\n");
    MPI_Finalize();
    return 1;
  }
  write_configs(dir, mib);
  MPI_Barrier(MPI_COMM_WORLD);

  const size_t n = (size_t)mib * 1024 * 1024 / sizeof(double);
  double *state = malloc(n * sizeof(double));
  if (state == NULL) die("malloc", -1);
  for (size_t i = 0; i < n; ++i) state[i] = (double)(i % 1000) + rank;
  const int per = count - 1, all = per * rounds;
  double *block[kSides];
  for (int s = 0; s < kSides; ++s) {
    block[s] = malloc(sizeof(double) * (size_t)all);
    if (block[s] == NULL) die("malloc", -1);
  }
  for (int r = 0; r < rounds; ++r) {
    for (int i = 0; i < kSides; ++i) {
      const int s = r % 2 ? kSides - 1 - i : i; /* odd rounds run backwards */
      run_side(&sides[s], state, n, count, ms, block[s] + r * per);
    }
  }
  if (rank == 0) {
    double med[kSides];
    printf("{\"ranks\": %d, \"mib_per_rank\": %ld, \"checkpoints\": %d, \"rounds\": %d, \"compute_ms\": %g", size,
           mib, count, rounds, ms);
    for (int s = 0; s < kSides; ++s) {
      const double m = mean(block[s], all);
      med[s] = median(block[s], all);
      printf(", \"%s_block_ms_median\": %.3f, \"%s_block_ms_mean\": %.3f", sides[s].name, med[s] * 1e3,
             sides[s].name, m * 1e3);
    }
    printf(", \"veloc_overhead_pct\": %.2f, \"fti_overhead_pct\": %.2f}\n", (med[1] / med[0] - 1) * 100,
           (med[3] / med[2] - 1) * 100);
  }
  for (int s = 0; s < kSides; ++s) free(block[s]);
  free(state);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  MPI_Finalize();
  return 0;
}
