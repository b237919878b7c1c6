/* Reading a saved job's ranks from a job of another size (docs/mpi.md,
 * "Restarting on another number of ranks"; docs/format.md 3.7), under mpirun
 * with 2 and 4 ranks (tests/CMakeLists.txt: mpi_saved_np2/4).
 *
 * The world's N ranks save versions 1-3 of two regions (on simulated nodes
 * of 2 ranks, version 2 also persistent); all but the last rank checkpoint a
 * version 4 that never commits globally. Then a job of N-1 ranks (a
 * sub-communicator, without simulated nodes: the shape comes from the
 * manifest) reads every saved rank's regions, whole and in windows, byte
 * exact, and checks the errors: a saved rank that does not exist, a region id
 * the version lacks, a window past the region's end, a version not globally
 * committed, a name no job saved, a damaged block (CORRUPT), and the fallback
 * to the persistent copy when the local file is lost or damaged. Finally the
 * collective latest / restore of the N-1 ranks refuse (STATE) to restore the
 * N ranks' versions rank by rank.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cairn/cairn_mpi.h"

#include "mpi_check.h"

/* An error code and a piece of the message that names what is wrong. */
#define CHECK_ERROR(rc, code, text, what)                                                      \
  CHECK((rc) == (code) && strstr(cairn_last_error(), (text)) != NULL, "%s: rc %d, want %d with '%s'", \
        (what), (rc), (code), (text))

enum { kBytes = 300 * 1024 + 123 }; /* several 64 KiB blocks and a partial one */
static char g_root[4096];

static unsigned char byte_of(int rank, int64_t v, size_t i) {
  return (unsigned char)(i * 31 + (size_t)v * 7 + (size_t)rank * 13);
}

static void setup(void) {
  if (g_rank == 0) {
    const char *tmp = getenv("TMPDIR");
    snprintf(g_root, sizeof g_root, "%s/cairn-mpi-saved.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(g_root) == NULL) g_root[0] = '\0';
  }
  MPI_Bcast(g_root, sizeof g_root, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (g_root[0] == '\0') MPI_Abort(MPI_COMM_WORLD, 2);
  char dir[4200];
  snprintf(dir, sizeof dir, "%s/scratch", g_root);
  setenv("CAIRN_SCRATCH", dir, 1);
  snprintf(dir, sizeof dir, "%s/persistent", g_root);
  setenv("CAIRN_PERSISTENT", dir, 1);
  setenv("CAIRN_HOST_CACHE", "2MiB", 1);
  setenv("CAIRN_BLOCK_SIZE", "64KiB", 1);
  setenv("CAIRN_KEEP", "4", 1);
  setenv("CAIRN_COPY_THREADS", "0", 1);
  setenv("CAIRN_HOST_CACHE_INIT", "lazy", 1);
  setenv("CAIRN_MPI_RANKS_PER_NODE", "2", 1);
}

/* The saving job: every rank of the world. */
static void save(void) {
  unsigned char *buf = malloc(kBytes);
  int32_t me = g_rank;
  cairn_client_t *c = NULL;
  int rc = cairn_open_mpi(MPI_COMM_WORLD, NULL, &c);
  CHECK(rc == CAIRN_OK, "cairn_open_mpi: %d", rc);
  if (rc != CAIRN_OK) MPI_Abort(MPI_COMM_WORLD, 3);
  CHECK(cairn_protect(c, 7, buf, kBytes) == CAIRN_OK, "protect 7");
  CHECK(cairn_protect(c, 8, &me, sizeof me) == CAIRN_OK, "protect 8");
  for (int64_t v = 1; v <= 4; ++v) {
    for (size_t i = 0; i < kBytes; ++i) buf[i] = byte_of(g_rank, v, i);
    if (v == 4 && g_rank == g_size - 1) break; /* never globally committed */
    rc = cairn_checkpoint(c, "state", v);
    CHECK(rc == CAIRN_OK, "checkpoint %lld: %d", (long long)v, rc);
    if (v == 4) break;
    rc = cairn_wait(c, "state", v, v == 2 ? CAIRN_LEVEL_PERSISTENT : CAIRN_LEVEL_LOCAL);
    CHECK(rc == CAIRN_OK, "collective wait %lld: %d", (long long)v, rc);
  }
  rc = cairn_wait(c, "state", 4, CAIRN_LEVEL_LOCAL);
  CHECK(rc != CAIRN_OK, "collective wait for version 4, which the last rank lacks, succeeded");
  CHECK(cairn_close(c) == CAIRN_OK, "close");
  free(buf);
}

/* Reads saved rank s's region 7 of version v in [off, off + n) and checks it. */
static void expect_bytes(cairn_client_t *c, int s, int64_t v, size_t off, size_t n, const char *what) {
  unsigned char *got = malloc(n ? n : 1);
  int rc = cairn_read_saved_region(c, "state", v, s, 7, off, got, n);
  CHECK(rc == CAIRN_OK, "%s: read of saved rank %d's version %lld [%zu, +%zu): %d", what, s, (long long)v, off, n, rc);
  size_t bad = n;
  for (size_t i = 0; rc == CAIRN_OK && i < n && bad == n; ++i) {
    if (got[i] != byte_of(s, v, off + i)) bad = i;
  }
  CHECK(bad == n, "%s: saved rank %d's version %lld differs at byte %zu", what, s, (long long)v, off + bad);
  free(got);
}

/* The reading job: ranks 0 .. N-2 of the world, without simulated nodes. */
static void read_back(MPI_Comm comm) {
  const int n = g_size;
  unsetenv("CAIRN_MPI_RANKS_PER_NODE");
  cairn_client_t *c = NULL;
  int rc = cairn_open_mpi(comm, NULL, &c);
  CHECK(rc == CAIRN_OK, "cairn_open_mpi on %d ranks: %d", n - 1, rc);
  if (rc != CAIRN_OK) MPI_Abort(MPI_COMM_WORLD, 3);

  int64_t latest = -1;
  int ranks = 0;
  rc = cairn_saved_latest(c, "state", &latest, &ranks);
  CHECK(rc == CAIRN_OK && latest == 3 && ranks == n, "saved_latest: rc %d, version %lld, %d ranks; want 3, %d",
        rc, (long long)latest, ranks, n);
  rc = cairn_saved_ranks(c, "state", 3, &ranks);
  CHECK(rc == CAIRN_OK && ranks == n, "saved_ranks(3): rc %d, %d ranks", rc, ranks);
  rc = cairn_saved_ranks(c, "state", 4, &ranks);
  CHECK_ERROR(rc, CAIRN_ERR_NOT_FOUND, "version 4", "saved_ranks(4), never globally committed");

  /* Every saved rank's regions, whole and in a window across blocks. */
  for (int s = 0; s < n; ++s) {
    size_t size = 0;
    rc = cairn_saved_region_size(c, "state", 3, s, 7, &size);
    CHECK(rc == CAIRN_OK && size == kBytes, "region size of saved rank %d: rc %d, %zu bytes", s, rc, size);
    expect_bytes(c, s, 3, 0, kBytes, "whole region");
    expect_bytes(c, s, 3, 65536 - 5, 140000, "window");
    expect_bytes(c, s, 1, kBytes - 1, 1, "last byte");
    int32_t who = -1;
    rc = cairn_read_saved_region(c, "state", 3, s, 8, 0, &who, sizeof who);
    CHECK(rc == CAIRN_OK && who == s, "region 8 of saved rank %d holds %d (rc %d)", s, who, rc);
  }

  /* Errors, each naming what is wrong. */
  unsigned char small[64];
  rc = cairn_read_saved_region(c, "state", 3, n, 7, 0, small, 1);
  CHECK_ERROR(rc, CAIRN_ERR_INVALID_ARGUMENT, "does not exist", "saved rank N");
  rc = cairn_read_saved_region(c, "state", 3, -1, 7, 0, small, 1);
  CHECK_ERROR(rc, CAIRN_ERR_INVALID_ARGUMENT, "does not exist", "saved rank -1");
  rc = cairn_read_saved_region(c, "state", 3, 0, 99, 0, small, 1);
  CHECK_ERROR(rc, CAIRN_ERR_INVALID_ARGUMENT, "no region id 99", "region 99");
  rc = cairn_read_saved_region(c, "state", 3, 0, 7, kBytes - 10, small, 20);
  CHECK_ERROR(rc, CAIRN_ERR_INVALID_ARGUMENT, "outside region 7", "window past the end");
  rc = cairn_read_saved_region(c, "state", 3, 0, 7, (size_t)-1, small, 2);
  CHECK_ERROR(rc, CAIRN_ERR_INVALID_ARGUMENT, "outside region 7", "offset overflowing");
  rc = cairn_read_saved_region(c, "state", 4, 0, 7, 0, small, 1);
  CHECK_ERROR(rc, CAIRN_ERR_NOT_FOUND, "not globally committed", "version 4 of saved rank 0");
  rc = cairn_read_saved_region(c, "state", 9, 0, 7, 0, small, 1);
  CHECK_ERROR(rc, CAIRN_ERR_NOT_FOUND, "version 9", "version 9");
  rc = cairn_read_saved_region(c, "nosuch", 3, 0, 7, 0, small, 1);
  CHECK_ERROR(rc, CAIRN_ERR_NOT_FOUND, "no saved MPI job", "a name no job saved");
  rc = cairn_saved_latest(c, "nosuch", &latest, &ranks);
  CHECK_ERROR(rc, CAIRN_ERR_NOT_FOUND, "no saved MPI job", "saved_latest of a name no job saved");

  /* Saved rank 0 loses its local version 2, saved rank 1's is damaged:
   * both are served from the persistent copy. Saved rank 1's version 3,
   * which has no persistent copy, damaged: CORRUPT naming the file. */
  MPI_Barrier(comm);
  char path[4400];
  if (g_rank == 0) {
    snprintf(path, sizeof path, "%s/scratch/node0/rank0/state/v%020d.cairn", g_root, 2);
    CHECK(unlink(path) == 0, "unlink %s", path);
    snprintf(path, sizeof path, "%s/scratch/node0/rank1/state/v%020d.cairn", g_root, 2);
    flip_byte(path, 4096 + 70000, 0x5a);
    snprintf(path, sizeof path, "%s/scratch/node0/rank1/state/v%020d.cairn", g_root, 3);
    flip_byte(path, 4096 + 70000, 0x5a);
  }
  MPI_Barrier(comm);
  expect_bytes(c, 0, 2, 0, kBytes, "version 2 of saved rank 0 from the persistent copy");
  expect_bytes(c, 1, 2, 0, kBytes, "version 2 of saved rank 1 (damaged locally) from the persistent copy");
  unsigned char *all = malloc(kBytes);
  rc = cairn_read_saved_region(c, "state", 3, 1, 7, 0, all, kBytes);
  CHECK_ERROR(rc, CAIRN_ERR_CORRUPT, "rank1", "damaged version 3 of saved rank 1");
  rc = cairn_read_saved_region(c, "state", 3, 1, 7, 0, all, 1000); /* a window before the damage */
  CHECK(rc == CAIRN_OK, "a window of undamaged blocks: %d", rc);
  free(all);
  CHECK(cairn_close(c) == CAIRN_OK, "close");

  /* The same N-1 ranks with the saved job's node shape: each finds saved
   * rank r's directory as its own, but the collective restart calls refuse
   * (the manifests record N ranks) instead of restoring a mix. */
  setenv("CAIRN_MPI_RANKS_PER_NODE", "2", 1);
  rc = cairn_open_mpi(comm, NULL, &c);
  CHECK(rc == CAIRN_OK, "cairn_open_mpi with simulated nodes: %d", rc);
  if (rc != CAIRN_OK) return;
  rc = cairn_latest(c, "state", &latest);
  CHECK_ERROR(rc, CAIRN_ERR_STATE, "was saved by a job of", "collective latest on another rank count");
  rc = cairn_restore_latest(c, "state", &latest);
  CHECK_ERROR(rc, CAIRN_ERR_STATE, "cairn_saved_latest", "collective restore_latest on another rank count");
  rc = cairn_restore(c, "state", 3);
  CHECK_ERROR(rc, CAIRN_ERR_STATE, "was saved by a job of", "collective restore on another rank count");
  CHECK(cairn_close(c) == CAIRN_OK, "close");
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  setup();
  save();
  MPI_Comm sub = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, g_rank < g_size - 1 || g_size == 1 ? 0 : MPI_UNDEFINED, g_rank, &sub);
  if (sub != MPI_COMM_NULL) {
    read_back(sub);
    MPI_Comm_free(&sub);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0) {
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    if (system(cmd) != 0) fprintf(stderr, "rank 0: could not remove %s\n", g_root);
  }
  int failures = g_failures;
  MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) printf("saved_test on %d ranks: %d failures\n", g_size, failures);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
