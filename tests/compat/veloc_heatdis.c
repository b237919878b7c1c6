/* A heat-distribution program written against VELOC's API (veloc.h), after
 * VELOC's test/heatdis_mem.c and heatdis_file.c: a 2-D grid split by rows
 * over the ranks (1-D decomposition), Jacobi steps with halo exchange,
 * a checkpoint every `every` iterations. Driven by veloc_heatdis.sh
 * (docs/veloc.md, "Tests").
 *
 *   veloc_heatdis <cfg> <mem|file|single|region> <iterations> <every> <out>
 *
 * mem:  the iteration and the grid are protected memory regions
 *       (VELOC_Mem_protect, VELOC_Checkpoint / VELOC_Restart_test + Restart);
 * file: the application writes them to a file it routes (VELOC_Route_file)
 *       in the checkpoint phase, and reads it back in the restart phase;
 * single: as mem, each rank opened on its own (VELOC_Init_single(rank));
 * region: as mem, the regions in the group of "heatdis"
 *       (VELOC_Region_protect) and a decoy region in the default group,
 *       which the checkpoints must leave out (VELOC_Recover_size gives -1).
 * HEATDIS_KILL_AT=K: after iteration K, wait for the last checkpoint
 *       (VELOC_Checkpoint_wait), then every rank SIGKILLs itself: a crash
 *       after a checkpoint that is known durable.
 * Prints "start fresh" or "restart from <v>", and for a restart the answers
 * of VELOC_Restart_test with bounds below v ("bound <b> -> <answer>"). At
 * the end rank 0 writes the whole grid to <out> (binary), for the driver to
 * compare with an uninterrupted run's.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <veloc.h>

enum { kCols = 96, kRows = 24 }; /* rows per rank, plus two halo rows */
static const char *const kName = "heatdis";

/* Rank 0's upper halo row is the heated boundary (never received). */
static void init(int rank, double *g) {
  memset(g, 0, sizeof(double) * kCols * (kRows + 2));
  if (rank == 0) {
    for (int j = kCols / 10; j < kCols * 9 / 10; ++j) g[j] = 100.0;
  }
}

static void step(int rank, int size, double *g, double *h) {
  memcpy(h, g, sizeof(double) * kCols * (kRows + 2));
  MPI_Request req[4];
  int n = 0;
  if (rank > 0) {
    MPI_Isend(g + kCols, kCols, MPI_DOUBLE, rank - 1, 0, MPI_COMM_WORLD, &req[n++]);
    MPI_Irecv(h, kCols, MPI_DOUBLE, rank - 1, 0, MPI_COMM_WORLD, &req[n++]);
  }
  if (rank < size - 1) {
    MPI_Isend(g + kRows * kCols, kCols, MPI_DOUBLE, rank + 1, 0, MPI_COMM_WORLD, &req[n++]);
    MPI_Irecv(h + (kRows + 1) * kCols, kCols, MPI_DOUBLE, rank + 1, 0, MPI_COMM_WORLD, &req[n++]);
  }
  MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
  for (int i = 1; i <= kRows; ++i) {
    for (int j = 1; j < kCols - 1; ++j) {
      g[i * kCols + j] = 0.25 * (h[(i - 1) * kCols + j] + h[(i + 1) * kCols + j] +
                                 h[i * kCols + j - 1] + h[i * kCols + j + 1]);
    }
  }
}

static void must(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "heatdis: %s failed\n", what);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
}

/* file mode: the state in one routed file per rank. */
static void save_file(int rank, int iter, const double *g) {
  char original[64], routed[VELOC_MAX_NAME];
  snprintf(original, sizeof original, "heat.%d.dat", rank);
  must(VELOC_Route_file(original, routed) == VELOC_SUCCESS, "VELOC_Route_file");
  FILE *f = fopen(routed, "wb");
  must(f != NULL, "fopen(routed file)");
  must(fwrite(&iter, sizeof iter, 1, f) == 1, "fwrite");
  must(fwrite(g, sizeof(double), kCols * (kRows + 2), f) == (size_t)(kCols * (kRows + 2)), "fwrite");
  must(fclose(f) == 0, "fclose");
}

static void load_file(int rank, int *iter, double *g) {
  char original[64], routed[VELOC_MAX_NAME];
  snprintf(original, sizeof original, "heat.%d.dat", rank);
  must(VELOC_Route_file(original, routed) == VELOC_SUCCESS, "VELOC_Route_file (restart)");
  FILE *f = fopen(routed, "rb");
  must(f != NULL, "fopen(restored file)");
  must(fread(iter, sizeof *iter, 1, f) == 1, "fread");
  must(fread(g, sizeof(double), kCols * (kRows + 2), f) == (size_t)(kCols * (kRows + 2)), "fread");
  fclose(f);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 6) {
    if (rank == 0) fprintf(stderr, "usage: %s <cfg> <mem|file|single> <iterations> <every> <out>\n", argv[0]);
    MPI_Finalize();
    return 1;
  }
  const int file_mode = strcmp(argv[2], "file") == 0;
  const int single = strcmp(argv[2], "single") == 0;
  const int region = strcmp(argv[2], "region") == 0;
  double decoy[4] = {0};
  const int iterations = atoi(argv[3]), every = atoi(argv[4]);
  const char *kill_at_env = getenv("HEATDIS_KILL_AT");
  const int kill_at = kill_at_env ? atoi(kill_at_env) : -1;

  if ((single ? VELOC_Init_single((unsigned)rank, argv[1]) : VELOC_Init(MPI_COMM_WORLD, argv[1])) != VELOC_SUCCESS) {
    printf("Error initializing VELOC! Aborting...\n");
    MPI_Finalize();
    return 2;
  }
  double *g = malloc(sizeof(double) * kCols * (kRows + 2));
  double *h = malloc(sizeof(double) * kCols * (kRows + 2));
  int i = 0;
  init(rank, g);
  if (region) {
    must(VELOC_Region_protect(0, &i, 1, sizeof(int), kName) == VELOC_SUCCESS, "VELOC_Region_protect(0)");
    must(VELOC_Region_protect(1, g, kCols * (kRows + 2), sizeof(double), kName) == VELOC_SUCCESS,
         "VELOC_Region_protect(1)");
    must(VELOC_Mem_protect(5, decoy, 4, sizeof(double)) == VELOC_SUCCESS, "VELOC_Mem_protect(decoy)");
    must(VELOC_Mem_protect(6, decoy, 4, sizeof(double)) == VELOC_SUCCESS, "VELOC_Mem_protect(decoy 6)");
    must(VELOC_Mem_clear() == VELOC_SUCCESS, "VELOC_Mem_clear");
    must(VELOC_Mem_unprotect(6) == VELOC_FAILURE, "VELOC_Mem_unprotect after VELOC_Mem_clear fails");
    must(VELOC_Mem_protect(5, decoy, 4, sizeof(double)) == VELOC_SUCCESS, "VELOC_Mem_protect(decoy)");
  } else if (!file_mode) {
    must(VELOC_Mem_protect(0, &i, 1, sizeof(int)) == VELOC_SUCCESS, "VELOC_Mem_protect(0)");
    must(VELOC_Mem_protect(1, g, kCols * (kRows + 2), sizeof(double)) == VELOC_SUCCESS, "VELOC_Mem_protect(1)");
  }

  int v = VELOC_Restart_test(kName, 0);
  if (v >= 0) {
    if (rank == 0) printf("restart from %d\n", v);
    for (int b = v - 1; b >= 0 && b >= v - 2 * every; b -= every / 2 > 0 ? every / 2 : 1) {
      int w = VELOC_Restart_test(kName, b);
      if (rank == 0) printf("bound %d -> %d\n", b, w);
    }
    if (file_mode) {
      must(VELOC_Restart_begin(kName, v) == VELOC_SUCCESS, "VELOC_Restart_begin");
      load_file(rank, &i, g);
      must(VELOC_Restart_end(1) == VELOC_SUCCESS, "VELOC_Restart_end");
    } else {
      must(VELOC_Restart_begin(kName, v) == VELOC_SUCCESS, "VELOC_Restart_begin");
      must(VELOC_Recover_size(1) == (int)(sizeof(double) * kCols * (kRows + 2)), "VELOC_Recover_size");
      if (region) must(VELOC_Recover_size(5) == -1, "VELOC_Recover_size of the decoy is -1");
      must(VELOC_Recover_mem() == VELOC_SUCCESS, "VELOC_Recover_mem");
      must(VELOC_Restart_end(1) == VELOC_SUCCESS, "VELOC_Restart_end");
    }
    must(i == v, "the restored iteration is the version");
  } else if (rank == 0) {
    printf("start fresh\n");
  }

  while (i < iterations) {
    step(rank, size, g, h);
    ++i;
    if (i % every == 0) {
      if (file_mode) {
        must(VELOC_Checkpoint_wait() == VELOC_SUCCESS, "VELOC_Checkpoint_wait");
        must(VELOC_Checkpoint_begin(kName, i) == VELOC_SUCCESS, "VELOC_Checkpoint_begin");
        save_file(rank, i, g);
        must(VELOC_Checkpoint_end(1) == VELOC_SUCCESS, "VELOC_Checkpoint_end");
      } else {
        must(VELOC_Checkpoint(kName, i) == VELOC_SUCCESS, "VELOC_Checkpoint");
      }
    }
    if (i == kill_at) {
      must(VELOC_Checkpoint_wait() == VELOC_SUCCESS, "VELOC_Checkpoint_wait before the kill");
      fflush(stdout);
      raise(SIGKILL);
    }
  }

  double *all = rank == 0 ? malloc(sizeof(double) * kCols * kRows * size) : NULL;
  MPI_Gather(g + kCols, kCols * kRows, MPI_DOUBLE, all, kCols * kRows, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    FILE *f = fopen(argv[5], "wb");
    must(f != NULL && fwrite(all, sizeof(double), (size_t)kCols * kRows * size, f) == (size_t)kCols * kRows * size,
         "writing the result");
    fclose(f);
    free(all);
  }
  if (region) {
    must(VELOC_Checkpoint_wait() == VELOC_SUCCESS, "VELOC_Checkpoint_wait");
    must(VELOC_Checkpoint_finished() == VELOC_SUCCESS, "VELOC_Checkpoint_finished after the wait");
    /* As VELOC's: this rank's scratch copies go (veloc_heatdis.sh checks),
     * the persistent ones stay and a restart still finds the newest. */
    must(VELOC_Cleanup(kName) == VELOC_SUCCESS, "VELOC_Cleanup");
    must(VELOC_Restart_test(kName, 0) == iterations / every * every, "VELOC_Restart_test after VELOC_Cleanup");
  }
  must(VELOC_Finalize(1) == VELOC_SUCCESS, "VELOC_Finalize");
  free(g);
  free(h);
  MPI_Finalize();
  return 0;
}
