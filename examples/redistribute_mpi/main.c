/* Restarting an MPI job on another number of ranks: a 1-D domain
 * decomposition saved on N ranks, read back on M (docs/mpi.md, "Restarting
 * on another number of ranks").
 *
 *   mpirun -np 4 cairn_redistribute save    ROOT   # versions 1, 2 of "field"
 *   mpirun -np 3 cairn_redistribute restart ROOT   # any M: reads the newest
 *
 * A global array of G elements is split in blocks: rank r of P owns
 * [r*G/P, (r+1)*G/P). Each rank protects its slice (region 0) and where the
 * slice starts (region 1: {G, first}), so that a restart needs no knowledge
 * of the old decomposition: it reads the saved ranks' region 1 (16 bytes
 * each), then from every saved rank whose slice overlaps its new one exactly
 * the overlap of region 0 (cairn_read_saved_region with an offset). Every
 * element's value is a function of its global index and the version, so the
 * restart checks the result byte-exact. Exit status 0 on every rank when all
 * ranks got exactly their new slice.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cairn/cairn_mpi.h"

enum { kG = 1000003 }; /* global elements (8 MB); not a multiple of any rank count */

static uint64_t value(int64_t i, int64_t version) {
  uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull + (uint64_t)version;
  x ^= x >> 29;
  return x * 0xBF58476D1CE4E5B9ull;
}

static int64_t first_of(int r, int p) { return (int64_t)kG * r / p; }

static int fail(int rank, const char *what, int rc) {
  fprintf(stderr, "rank %d: %s: %s (%d: %s)\n", rank, what, cairn_strerror(rc), rc, cairn_last_error());
  return 1;
}

static int save(cairn_client_t *c, int rank, int size) {
  const int64_t lo = first_of(rank, size), n = first_of(rank + 1, size) - lo;
  uint64_t *slice = malloc((size_t)n * sizeof *slice);
  int64_t meta[2] = {kG, lo};
  int rc = cairn_protect(c, 0, slice, (size_t)n * sizeof *slice);
  if (rc == CAIRN_OK) rc = cairn_protect(c, 1, meta, sizeof meta);
  for (int64_t v = 1; rc == CAIRN_OK && v <= 2; ++v) {
    for (int64_t i = 0; i < n; ++i) slice[i] = value(lo + i, v);
    rc = cairn_checkpoint(c, "field", v);
    if (rc == CAIRN_OK) rc = cairn_wait(c, "field", v, CAIRN_LEVEL_LOCAL); /* collective */
  }
  free(slice);
  if (rc != CAIRN_OK) return fail(rank, "save", rc);
  if (rank == 0) printf("saved versions 1-2 of 'field' (%d elements) on %d ranks\n", kG, size);
  return 0;
}

static int restart(cairn_client_t *c, int rank, int size) {
  int64_t version = -1;
  int saved = 0;
  int rc = cairn_saved_latest(c, "field", &version, &saved); /* collective */
  if (rc != CAIRN_OK) return fail(rank, "cairn_saved_latest", rc);
  /* The old decomposition, from the saved ranks' region 1. */
  int64_t *old_first = malloc(((size_t)saved + 1) * sizeof *old_first);
  for (int s = 0; s < saved && rc == CAIRN_OK; ++s) {
    int64_t meta[2];
    rc = cairn_read_saved_region(c, "field", version, s, 1, 0, meta, sizeof meta);
    if (rc == CAIRN_OK && meta[0] != kG) {
      fprintf(stderr, "rank %d: saved rank %d holds %" PRId64 " of %" PRId64 " elements\n", rank, s, meta[0], (int64_t)kG);
      free(old_first);
      return 1;
    }
    old_first[s] = meta[1];
  }
  old_first[saved] = kG;
  if (rc != CAIRN_OK) {
    free(old_first);
    return fail(rank, "reading the saved decomposition", rc);
  }
  /* This rank's new slice: the overlap with each old slice, read in place. */
  const int64_t lo = first_of(rank, size), hi = first_of(rank + 1, size);
  uint64_t *slice = malloc((size_t)(hi - lo) * sizeof *slice);
  int from = -1, to = -1;
  for (int s = 0; s < saved && rc == CAIRN_OK; ++s) {
    const int64_t a = lo > old_first[s] ? lo : old_first[s];
    const int64_t b = hi < old_first[s + 1] ? hi : old_first[s + 1];
    if (a >= b) continue;
    if (from < 0) from = s;
    to = s;
    rc = cairn_read_saved_region(c, "field", version, s, 0, (size_t)(a - old_first[s]) * sizeof *slice,
                                 slice + (a - lo), (size_t)(b - a) * sizeof *slice);
  }
  int bad = rc != CAIRN_OK;
  if (bad) fail(rank, "cairn_read_saved_region", rc);
  for (int64_t i = lo; !bad && i < hi; ++i) {
    if (slice[i - lo] != value(i, version)) {
      fprintf(stderr, "rank %d: element %" PRId64 " differs\n", rank, i);
      bad = 1;
    }
  }
  if (!bad) {
    printf("rank %d of %d: elements [%" PRId64 ", %" PRId64 ") of version %" PRId64
           " from saved ranks %d..%d of %d, byte-exact\n", rank, size, lo, hi, version, from, to, saved);
  }
  free(slice);
  free(old_first);
  return bad;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 3 || (strcmp(argv[1], "save") != 0 && strcmp(argv[1], "restart") != 0)) {
    if (rank == 0) fprintf(stderr, "usage: cairn_redistribute save|restart ROOT\n");
    MPI_Finalize();
    return 2;
  }
  /* ROOT/scratch (node-local, or simulated nodes with
   * CAIRN_MPI_RANKS_PER_NODE); the rest of the configuration from the CAIRN_*
   * environment, as for any client. */
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/scratch", argv[2]);
  setenv("CAIRN_SCRATCH", dir, 1);
  setenv("CAIRN_HOST_CACHE", "32MiB", 0);
  cairn_client_t *c = NULL;
  int rc = cairn_open_mpi(MPI_COMM_WORLD, NULL, &c);
  int failed = rc != CAIRN_OK ? fail(rank, "cairn_open_mpi", rc) : 0;
  if (!failed) failed = strcmp(argv[1], "save") == 0 ? save(c, rank, size) : restart(c, rank, size);
  if (c != NULL && cairn_close(c) != CAIRN_OK) failed = 1;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return failed;
}
