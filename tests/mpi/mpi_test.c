/* MPI tests of libcairn_mpi (docs/mpi.md), run by ctest under mpirun with 2
 * and 4 ranks (tests/CMakeLists.txt). Every rank checks what it sees and the
 * failures are summed over the ranks: the program exits 1 on every rank when
 * any rank saw a failure.
 *
 *   mpi_test restart   per-rank layout, collective wait, collective latest
 *                      when ranks lack versions, byte-exact collective
 *                      restore, fallback of all ranks when one rank's file is
 *                      damaged, the global manifest
 *   mpi_test persistent  collective wait at the persistent level, per-rank
 *                      persistent layout, manifest, restore from the
 *                      persistent directories when the local copies are lost
 *   mpi_test config    a rank whose configuration does not load, configs
 *                      that differ across ranks and a differing
 *                      CAIRN_MPI_RANKS_PER_NODE: an error on every rank
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cairn/cairn_mpi.h"

static int g_rank, g_size, g_failures;

#define CHECK(cond, ...)                                               \
  do {                                                                 \
    if (!(cond)) {                                                     \
      fprintf(stderr, "rank %d: %s:%d: ", g_rank, __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                                    \
      fprintf(stderr, " [cairn: %s]\n", cairn_last_error());           \
      ++g_failures;                                                    \
    }                                                                  \
  } while (0)

enum { kBytes = 300 * 1024 + 123 }; /* several blocks and a partial one */
static char g_root[4096];

/* The content of version v on this rank: differs per rank and version. */
static void fill(unsigned char *buf, int64_t v) {
  for (size_t i = 0; i < kBytes; ++i) buf[i] = (unsigned char)(i * 31 + (size_t)v * 7 + (size_t)g_rank * 13);
}
static int holds(const unsigned char *buf, int64_t v) {
  for (size_t i = 0; i < kBytes; ++i) {
    if (buf[i] != (unsigned char)(i * 31 + (size_t)v * 7 + (size_t)g_rank * 13)) return 0;
  }
  return 1;
}

/* A fresh job root shared by the ranks; the configuration of every rank. */
static void setup(void) {
  if (g_rank == 0) {
    const char *tmp = getenv("TMPDIR");
    snprintf(g_root, sizeof g_root, "%s/cairn-mpi-test.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(g_root) == NULL) g_root[0] = '\0';
  }
  MPI_Bcast(g_root, sizeof g_root, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (g_root[0] == '\0') {
    fprintf(stderr, "rank %d: mkdtemp failed\n", g_rank);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  char dir[4200];
  snprintf(dir, sizeof dir, "%s/scratch", g_root);
  setenv("CAIRN_SCRATCH", dir, 1);
  setenv("CAIRN_HOST_CACHE", "1MiB", 1);
  setenv("CAIRN_BLOCK_SIZE", "64KiB", 1);
  setenv("CAIRN_KEEP", "4", 1);
  setenv("CAIRN_COPY_THREADS", "0", 1);
  setenv("CAIRN_HOST_CACHE_INIT", "lazy", 1);
  setenv("CAIRN_MPI_RANKS_PER_NODE", "2", 1);
}

static void cleanup(void) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0 && g_root[0] != '\0') {
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    if (system(cmd) != 0) fprintf(stderr, "rank 0: could not remove %s\n", g_root);
  }
}

/* This rank's file of version v (docs/format.md, 3.5). */
static void version_path(char *out, size_t n, int64_t v) {
  snprintf(out, n, "%s/scratch/node%d/rank%d/state/v%020lld.cairn", g_root, g_rank / 2, g_rank, (long long)v);
}

static int all_equal(int64_t v) {
  int64_t lo = v, hi = v;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi;
}

static cairn_client_t *open_client(unsigned char *buf) {
  cairn_client_t *c = NULL;
  int rc = cairn_open_mpi(MPI_COMM_WORLD, NULL, &c);
  CHECK(rc == CAIRN_OK, "cairn_open_mpi: %d", rc);
  if (rc != CAIRN_OK) MPI_Abort(MPI_COMM_WORLD, 3); /* nothing below can run */
  rc = cairn_protect(c, 7, buf, kBytes);
  CHECK(rc == CAIRN_OK, "cairn_protect: %d", rc);
  return c;
}

static void test_restart(void) {
  unsigned char *buf = malloc(kBytes);
  const int last = g_size - 1;
  char path[4400];

  /* Run 1: versions 1..4, each waited for collectively; the last rank never
   * checkpoints version 4. */
  cairn_client_t *c = open_client(buf);
  for (int64_t v = 1; v <= 3; ++v) {
    fill(buf, v);
    int rc = cairn_checkpoint(c, "state", v);
    CHECK(rc == CAIRN_OK, "checkpoint %lld: %d", (long long)v, rc);
    rc = cairn_wait(c, "state", v, CAIRN_LEVEL_LOCAL);
    CHECK(rc == CAIRN_OK, "collective wait %lld: %d", (long long)v, rc);
  }
  version_path(path, sizeof path, 3);
  CHECK(access(path, F_OK) == 0, "per-rank layout: %s missing", path);
  if (g_rank != last) {
    fill(buf, 4);
    int rc = cairn_checkpoint(c, "state", 4);
    CHECK(rc == CAIRN_OK, "checkpoint 4: %d", rc);
  }
  /* A collective wait for a version one rank lacks fails on every rank. */
  int rc = cairn_wait(c, "state", 4, CAIRN_LEVEL_LOCAL);
  CHECK(rc != CAIRN_OK, "collective wait for version 4, which rank %d lacks, succeeded", last);
  if (g_rank != last) CHECK(strstr(cairn_last_error(), "rank") != NULL, "error does not name the rank");
  rc = cairn_close(c);
  CHECK(rc == CAIRN_OK, "close: %d", rc);

  /* The manifest records version 3 as committed on every rank. */
  char mpath[4400];
  snprintf(mpath, sizeof mpath, "%s/scratch/node%d/rank%d/state/global", g_root, g_rank / 2, g_rank);
  FILE *f = fopen(mpath, "r");
  char text[256] = {0};
  if (f) {
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
  }
  char want[128];
  snprintf(want, sizeof want, "cairn-global 1\nranks %d\ncommitted 3\npersistent -1\nranks_per_node 2\n", g_size);
  CHECK(strcmp(text, want) == 0, "manifest %s is '%s', want '%s'", mpath, text, want);

  /* Rank 0 loses its file of version 3: versions every rank has are 1, 2. */
  if (g_rank == 0) {
    version_path(path, sizeof path, 3);
    CHECK(unlink(path) == 0, "unlink %s", path);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  /* Run 2: the restart. */
  memset(buf, 0, kBytes);
  c = open_client(buf);
  int64_t latest = -1;
  rc = cairn_latest(c, "state", &latest);
  CHECK(rc == CAIRN_OK && latest == 2, "collective latest: rc %d, version %lld, want 2", rc, (long long)latest);
  int64_t got = -1;
  rc = cairn_restore_latest(c, "state", &got);
  CHECK(rc == CAIRN_OK && got == 2, "collective restore_latest: rc %d, version %lld, want 2", rc, (long long)got);
  CHECK(holds(buf, 2), "restored data is not version 2 of rank %d", g_rank);
  CHECK(all_equal(got), "ranks restored different versions");
  rc = cairn_close(c);
  CHECK(rc == CAIRN_OK, "close: %d", rc);

  /* Rank 1's version 2 is damaged (one data byte): every rank falls back to
   * version 1 together. */
  if (g_rank == 1) {
    version_path(path, sizeof path, 2);
    FILE *d = fopen(path, "r+b");
    CHECK(d != NULL, "open %s", path);
    if (d) {
      fseek(d, 4096 + 1000, SEEK_SET);
      int ch = fgetc(d);
      fseek(d, 4096 + 1000, SEEK_SET);
      fputc(ch ^ 0x5a, d);
      fclose(d);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  memset(buf, 0, kBytes);
  c = open_client(buf);
  got = -1;
  rc = cairn_restore_latest(c, "state", &got);
  CHECK(rc == CAIRN_OK && got == 1, "restore_latest after damage on rank 1: rc %d, version %lld, want 1", rc,
        (long long)got);
  CHECK(holds(buf, 1), "restored data is not version 1 of rank %d", g_rank);
  CHECK(all_equal(got), "ranks restored different versions after the damage");
  /* Restoring the damaged version explicitly fails on every rank. */
  rc = cairn_restore(c, "state", 2);
  CHECK(rc == CAIRN_ERR_CORRUPT, "collective restore of version 2 (damaged on rank 1): rc %d, want CORRUPT", rc);
  rc = cairn_close(c);
  CHECK(rc == CAIRN_OK, "close: %d", rc);
  free(buf);
}

/* The persistent level: a collective wait at CAIRN_LEVEL_PERSISTENT puts
 * each rank's file under <persistent>/rank<r> and records it in the
 * manifest; with every rank's local copy lost, the restart restores from the
 * persistent directories, byte-exact. */
static void test_persistent(void) {
  unsigned char *buf = malloc(kBytes);
  char dir[4200], path[4400];
  snprintf(dir, sizeof dir, "%s/persistent", g_root);
  setenv("CAIRN_PERSISTENT", dir, 1);
  cairn_client_t *c = open_client(buf);
  for (int64_t v = 1; v <= 2; ++v) {
    fill(buf, v);
    int rc = cairn_checkpoint(c, "state", v);
    CHECK(rc == CAIRN_OK, "checkpoint %lld: %d", (long long)v, rc);
  }
  int rc = cairn_wait(c, "state", 2, CAIRN_LEVEL_PERSISTENT);
  CHECK(rc == CAIRN_OK, "collective wait at the persistent level: %d", rc);
  snprintf(path, sizeof path, "%s/rank%d/state/v%020lld.cairn", dir, g_rank, 2ll);
  CHECK(access(path, F_OK) == 0, "per-rank persistent layout: %s missing", path);
  rc = cairn_close(c);
  CHECK(rc == CAIRN_OK, "close: %d", rc);

  char mpath[4400], text[256] = {0}, want[128];
  snprintf(mpath, sizeof mpath, "%s/scratch/node%d/rank%d/state/global", g_root, g_rank / 2, g_rank);
  FILE *f = fopen(mpath, "r");
  if (f) {
    text[fread(text, 1, sizeof text - 1, f)] = '\0';
    fclose(f);
  }
  snprintf(want, sizeof want, "cairn-global 1\nranks %d\ncommitted 2\npersistent 2\nranks_per_node 2\n", g_size);
  CHECK(strcmp(text, want) == 0, "manifest %s is '%s', want '%s'", mpath, text, want);

  /* Every rank loses its local copies of version 2. */
  version_path(path, sizeof path, 2);
  CHECK(unlink(path) == 0, "unlink %s", path);
  MPI_Barrier(MPI_COMM_WORLD);
  memset(buf, 0, kBytes);
  c = open_client(buf);
  int64_t got = -1;
  rc = cairn_restore_latest(c, "state", &got);
  CHECK(rc == CAIRN_OK && got == 2, "restore_latest from the persistent level: rc %d, version %lld, want 2", rc,
        (long long)got);
  CHECK(holds(buf, 2), "restored data is not version 2 of rank %d", g_rank);
  rc = cairn_close(c);
  CHECK(rc == CAIRN_OK, "close: %d", rc);
  free(buf);
}

/* Opens with the environment as it is now: must fail on every rank with
 * CAIRN_ERR_CONFIG and a message containing `expect`. */
static void expect_config_error(const char *what, const char *expect) {
  cairn_client_t *c = NULL;
  int rc = cairn_open_mpi(MPI_COMM_WORLD, NULL, &c);
  CHECK(rc == CAIRN_ERR_CONFIG && c == NULL, "%s: rc %d, want CAIRN_ERR_CONFIG", what, rc);
  CHECK(strstr(cairn_last_error(), expect) != NULL, "%s: message lacks '%s'", what, expect);
  if (c) cairn_close(c);
}

static void test_config(void) {
  /* One rank's configuration does not load. */
  if (g_rank == g_size - 1) setenv("CAIRN_KEEP", "0", 1);
  char rank_text[64];
  snprintf(rank_text, sizeof rank_text, "rank %d", g_size - 1);
  expect_config_error("a bad configuration on the last rank", g_rank == g_size - 1 ? "CAIRN_KEEP" : rank_text);
  setenv("CAIRN_KEEP", "4", 1);

  /* Block sizes differ across ranks. */
  if (g_rank == 1) setenv("CAIRN_BLOCK_SIZE", "128KiB", 1);
  expect_config_error("different block sizes", "host_cache.block_size");
  setenv("CAIRN_BLOCK_SIZE", "64KiB", 1);

  /* Scratch roots differ across ranks. */
  char other[4200];
  snprintf(other, sizeof other, "%s/elsewhere", g_root);
  char mine[4200];
  snprintf(mine, sizeof mine, "%s", getenv("CAIRN_SCRATCH"));
  if (g_rank == 0) setenv("CAIRN_SCRATCH", other, 1);
  expect_config_error("different scratch roots", "storage.scratch");
  setenv("CAIRN_SCRATCH", mine, 1);

  /* Simulated nodes of different sizes. */
  if (g_rank == 0) setenv("CAIRN_MPI_RANKS_PER_NODE", "1", 1);
  expect_config_error("different CAIRN_MPI_RANKS_PER_NODE", "CAIRN_MPI_RANKS_PER_NODE");
  setenv("CAIRN_MPI_RANKS_PER_NODE", "2", 1);

  /* And with everything agreeing again, the open succeeds. */
  cairn_client_t *c = NULL;
  int rc = cairn_open_mpi(MPI_COMM_WORLD, NULL, &c);
  CHECK(rc == CAIRN_OK, "open with agreeing configurations: %d", rc);
  rc = cairn_close(c);
  CHECK(rc == CAIRN_OK, "close: %d", rc);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (argc != 2 || (strcmp(argv[1], "restart") != 0 && strcmp(argv[1], "config") != 0 &&
                    strcmp(argv[1], "persistent") != 0)) {
    if (g_rank == 0) fprintf(stderr, "usage: mpi_test restart|persistent|config\n");
    MPI_Finalize();
    return 2;
  }
  setup();
  if (strcmp(argv[1], "restart") == 0) test_restart();
  else if (strcmp(argv[1], "persistent") == 0) test_persistent();
  else test_config();
  cleanup();
  int failures = g_failures;
  MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) printf("mpi_test %s on %d ranks: %d failures\n", argv[1], g_size, failures);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
