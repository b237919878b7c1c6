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
 *                      that differ across ranks and a differing or bad
 *                      CAIRN_MPI_RANKS_PER_NODE: an error on every rank;
 *                      mpi.ranks_per_node from a configuration file
 *   mpi_test l2        L2 partner copies and the loss of a simulated node
 *                      (test_l2 says what it checks)
 */
#include "manifest_read.h"
#include "mpi_common.h"

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

/* This rank's file of version v (docs/format.md, 3.5). */
static void version_path(char *out, size_t n, int64_t v) {
  snprintf(out, n, "%s/scratch/node%d/rank%d/state/v%020lld.cairn", g_root, g_rank / 2, g_rank, (long long)v);
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
  char text[256];
  test_manifest_text(mpath, text, sizeof text);
  char want[128];
  snprintf(want, sizeof want, "ranks %d committed 3 persistent -1 ranks_per_node 2", g_size);
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
    flip_byte(path, 4096 + 1000, 0x5a);
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

  char mpath[4400], text[256], want[128];
  snprintf(mpath, sizeof mpath, "%s/scratch/node%d/rank%d/state/global", g_root, g_rank / 2, g_rank);
  test_manifest_text(mpath, text, sizeof text);
  snprintf(want, sizeof want, "ranks %d committed 2 persistent 2 ranks_per_node 2", g_size);
  CHECK(strcmp(text, want) == 0, "manifest %s is '%s', want '%s'", mpath, text, want);
  /* ... and its copy in the persistent directory (docs/format.md 3.6). */
  snprintf(mpath, sizeof mpath, "%s/rank%d/state/global", dir, g_rank);
  test_manifest_text(mpath, text, sizeof text);
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
  setenv("CAIRN_MPI_RANKS_PER_NODE", "two", 1);
  expect_config_error("a CAIRN_MPI_RANKS_PER_NODE that is not a count", "CAIRN_MPI_RANKS_PER_NODE");

  /* mpi.ranks_per_node from a configuration file, the variable unset: rank
   * r's files go to node r / 2's directory. */
  unsetenv("CAIRN_MPI_RANKS_PER_NODE");
  char conf[4400], file[4400];
  snprintf(conf, sizeof conf, "%s/nodes.rank%d.toml", g_root, g_rank);
  FILE *f = fopen(conf, "w");
  CHECK(f != NULL && fputs("[mpi]\nranks_per_node = 2\n", f) >= 0 && fclose(f) == 0, "writing %s", conf);
  unsigned char *buf = calloc(1, kBytes);
  cairn_client_t *nodes = NULL;
  int rc = cairn_open_mpi(MPI_COMM_WORLD, conf, &nodes);
  CHECK(rc == CAIRN_OK, "open with mpi.ranks_per_node = 2 in %s: %d", conf, rc);
  if (rc == CAIRN_OK) {
    CHECK(cairn_protect(nodes, 0, buf, kBytes) == CAIRN_OK, "protect");
    CHECK(cairn_checkpoint(nodes, "nodes", 1) == CAIRN_OK, "checkpoint");
    CHECK(cairn_wait(nodes, "nodes", 1, CAIRN_LEVEL_LOCAL) == CAIRN_OK, "wait");
    CHECK(cairn_close(nodes) == CAIRN_OK, "close");
    snprintf(file, sizeof file, "%s/scratch/node%d/rank%d/nodes/v%020d.cairn", g_root, g_rank / 2, g_rank, 1);
    CHECK(access(file, F_OK) == 0, "%s is missing: mpi.ranks_per_node was not used", file);
  }
  free(buf);
  setenv("CAIRN_MPI_RANKS_PER_NODE", "2", 1);

  /* And with everything agreeing again, the open succeeds. */
  cairn_client_t *c = NULL;
  rc = cairn_open_mpi(MPI_COMM_WORLD, NULL, &c);
  CHECK(rc == CAIRN_OK, "open with agreeing configurations: %d", rc);
  rc = cairn_close(c);
  CHECK(rc == CAIRN_OK, "close: %d", rc);
}

/* L2 partner copies (CAIRN_L2_EVERY=1), on 2 simulated nodes: every
 * collective wait stores each rank's file at its partner on the other node
 * (byte-identical, under <partner's dir>/.partner/rank<r>); with node 1's
 * whole directory deleted, the restart restores the newest version from the
 * partner copies on every rank, byte-exact, and node 1's ranks log that L2
 * served them, while node 0's ranks send their copies again (node 1 had
 * them); a damaged local file is replaced from the partner too; node 0
 * lost next is restored from those copies.
 * CAIRN_L2_EVERY=2 copies every second version only; a differing value and a
 * job on one node are configuration errors on every rank. */
static void test_l2(void) {
  const int k = g_size / 2; /* two simulated nodes */
  char text[32];
  snprintf(text, sizeof text, "%d", k);
  setenv("CAIRN_MPI_RANKS_PER_NODE", text, 1);
  setenv("CAIRN_L2_EVERY", "1", 1);
  const int partner = (g_rank + k) % g_size, node = g_rank / k;
  unsigned char *buf = malloc(kBytes);
  char path[4400], copy[4400];

  cairn_client_t *c = open_client(buf);
  for (int64_t v = 1; v <= 3; ++v) {
    fill(buf, v);
    int rc = cairn_checkpoint(c, "state", v);
    CHECK(rc == CAIRN_OK, "checkpoint %lld: %d", (long long)v, rc);
    /* The copy travels in the background: a checkpoint never starts its own
     * version's transfer (it moves at later Cairn calls), so no partner
     * holds it yet; the wait completes it. */
    snprintf(copy, sizeof copy, "%s/scratch/node%d/rank%d/.partner/rank%d/state/v%020lld.cairn", g_root,
             partner / k, partner, g_rank, (long long)v);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(access(copy, F_OK) != 0, "the partner copy %s exists when checkpoint %lld returns", copy, (long long)v);
    MPI_Barrier(MPI_COMM_WORLD);
    rc = cairn_wait(c, "state", v, CAIRN_LEVEL_LOCAL);
    CHECK(rc == CAIRN_OK, "collective wait %lld with L2: %d", (long long)v, rc);
    CHECK(access(copy, F_OK) == 0, "the partner copy %s is missing after wait %lld", copy, (long long)v);
  }
  CHECK(cairn_close(c) == CAIRN_OK, "close");
  snprintf(path, sizeof path, "%s/scratch/node%d/rank%d/state/v%020d.cairn", g_root, node, g_rank, 3);
  snprintf(copy, sizeof copy, "%s/scratch/node%d/rank%d/.partner/rank%d/state/v%020d.cairn", g_root,
           partner / k, partner, g_rank, 3);
  size_t n1 = 0, n2 = 0;
  unsigned char *a = slurp(path, &n1), *b = slurp(copy, &n2);
  CHECK(a && b && n1 == n2 && memcmp(a, b, n1) == 0, "partner copy %s is not the file %s", copy, path);
  free(a);
  free(b);

  /* Node 1 is lost: its whole local directory. */
  lose_nodes(1, -1);
  memset(buf, 0, kBytes);
  c = open_client(buf);
  int64_t got = -1;
  char log[4096];
  int rc = restore_logged(c, -1, &got, log, sizeof log);
  CHECK(rc == CAIRN_OK && got == 3, "restore_latest after losing node 1: rc %d, version %lld", rc, (long long)got);
  CHECK(holds(buf, 3), "version 3 is not byte-exact after the restore from L2");
  CHECK((strstr(log, "from its partner copy on rank") != NULL) == (node == 1),
        "which level served: the log says '%s' on node %d", log, node);

  /* Node 0's ranks lost their copies with node 1: the restore sent them
   * again (Refill), byte-identical. */
  snprintf(copy, sizeof copy, "%s/scratch/node%d/rank%d/.partner/rank%d/state/v%020d.cairn", g_root,
           partner / k, partner, g_rank, 3);
  if (node == 0) {
    a = slurp(path, &n1);
    b = slurp(copy, &n2);
    CHECK(a && b && n1 == n2 && memcmp(a, b, n1) == 0, "the partner copy %s was not sent again", copy);
    CHECK(strstr(log, "partner copy sent again") != NULL, "node 0's log does not say its copy was sent again: '%s'",
          log);
    CHECK(strstr(log, "sent again in the background") != NULL,
          "node 0's log does not say its older versions' copies are sent again: '%s'", log);
    free(a);
    free(b);
  }

  /* Rank k's local file of version 3 (just recovered) is damaged, a data
   * byte: restore(3) takes its partner's copy (on rank 0, node 0, which kept
   * it) and succeeds everywhere. */
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == k) {
    flip_byte(path, 4096 + 1000, 0x20);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  memset(buf, 0, kBytes);
  rc = restore_logged(c, 3, &got, log, sizeof log);
  CHECK(rc == CAIRN_OK && holds(buf, 3), "restore(3) with rank %d's copy damaged: rc %d", k, rc);
  CHECK((strstr(log, "(L2)") != NULL) == (g_rank == k), "the damaged rank's log says '%s'", log);
  /* The same damage found by restore_latest: it retries version 3 with the
   * partner's copy instead of falling back to version 2. */
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == k) {
    flip_byte(path, 4096 + 70000, 0x01);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  memset(buf, 0, kBytes);
  rc = restore_logged(c, -1, &got, log, sizeof log);
  CHECK(rc == CAIRN_OK && got == 3 && holds(buf, 3), "restore_latest with rank %d's copy damaged: rc %d, version %lld",
        k, rc, (long long)got);
  CHECK((strstr(log, "(L2)") != NULL) == (g_rank == k), "restore_latest: the damaged rank's log says '%s'", log);
  CHECK(cairn_close(c) == CAIRN_OK, "close");

  /* Node 0's older versions lost their copies with node 1 too: the first
   * recovery queued the ones the partner's retention keeps (keep_versions -
   * 1 below version 3) for the background transfers, which close completed;
   * each copy is its file, byte-identical. */
  if (node == 0) {
    const int keep = atoi(getenv("CAIRN_KEEP"));
    for (int v = 2; v >= 1 && v > 3 - keep; --v) {
      char own[4400];
      snprintf(own, sizeof own, "%s/scratch/node%d/rank%d/state/v%020d.cairn", g_root, node, g_rank, v);
      snprintf(copy, sizeof copy, "%s/scratch/node%d/rank%d/.partner/rank%d/state/v%020d.cairn", g_root,
               partner / k, partner, g_rank, v);
      a = slurp(own, &n1);
      b = slurp(copy, &n2);
      CHECK(a && b && n1 == n2 && memcmp(a, b, n1) == 0, "the partner copy %s of an older version was not sent again",
            copy);
      free(a);
      free(b);
    }
  }

  /* Node 0 is lost next, with no wait between: its ranks get version 3
   * from the copies sent again to node 1 (without them: no version). */
  lose_nodes(0, -1);
  memset(buf, 0, kBytes);
  c = open_client(buf);
  rc = restore_logged(c, -1, &got, log, sizeof log);
  CHECK(rc == CAIRN_OK && got == 3 && holds(buf, 3), "restore_latest after losing node 0 too: rc %d, version %lld", rc,
        (long long)got);
  CHECK((strstr(log, "from its partner copy on rank") != NULL) == (node == 0),
        "second loss: the log says '%s' on node %d", log, node);
  CHECK(cairn_close(c) == CAIRN_OK, "close");

  /* CAIRN_L2_EVERY=2 counts checkpoints, not waits (docs/mpi.md): the 2nd
   * and 4th checkpoints of a client are its L2 turns. Checkpoints 1-3 come
   * before the first wait (for 3, no turn: it copies nothing and returns);
   * the wait for 4, the second wait, is a turn and returns once 4's copy
   * and every copy queued before it (2's, sent in the background) are
   * acknowledged: 2 copies in the stats. Waits counted instead would have
   * made the wait for 4 the only turn (1 copy). (The files: with layered
   * versions and keep_versions 2 the partner may keep 3 and 4's chain and
   * delete 2's copy, so the count is what is checked.) */
  setenv("CAIRN_L2_EVERY", "2", 1);
  c = open_client(buf);
  for (int64_t v = 1; v <= 4; ++v) {
    fill(buf, v);
    rc = cairn_checkpoint(c, "sparse", v);
    CHECK(rc == CAIRN_OK, "checkpoint %lld: %d", (long long)v, rc);
    if (v < 3) continue;
    rc = cairn_wait(c, "sparse", v, CAIRN_LEVEL_LOCAL);
    CHECK(rc == CAIRN_OK, "collective wait %lld: %d", (long long)v, rc);
    snprintf(copy, sizeof copy, "%s/scratch/node%d/rank%d/.partner/rank%d/sparse/v%020lld.cairn", g_root,
             partner / k, partner, g_rank, (long long)v);
    CHECK((access(copy, F_OK) == 0) == (v == 4), "CAIRN_L2_EVERY=2: copy of version %lld %s after its wait",
          (long long)v, v == 4 ? "missing" : "present");
  }
  cairn_stats_t st = CAIRN_STATS_INIT;
  rc = cairn_stats(c, &st);
  CHECK(rc == CAIRN_OK && st.mpi_l2_copies == 2,
        "CAIRN_L2_EVERY=2: %llu partner copies acknowledged after the waits for checkpoints 3 and 4, want 2 "
        "(checkpoints 2 and 4)", (unsigned long long)st.mpi_l2_copies);
  CHECK(cairn_close(c) == CAIRN_OK, "close");

  /* Bad settings: an error on every rank. */
  if (g_rank == 0) setenv("CAIRN_L2_EVERY", "1", 1);
  expect_config_error("CAIRN_L2_EVERY differing", "mpi.l2_every (CAIRN_L2_EVERY)");
  setenv("CAIRN_L2_EVERY", g_rank == g_size - 1 ? "often" : "1", 1);
  snprintf(text, sizeof text, "rank %d", g_size - 1);
  expect_config_error("CAIRN_L2_EVERY not a number", g_rank == g_size - 1 ? "CAIRN_L2_EVERY='often'" : text);
  setenv("CAIRN_L2_EVERY", "1", 1);
  snprintf(text, sizeof text, "%d", g_size);
  setenv("CAIRN_MPI_RANKS_PER_NODE", text, 1);
  expect_config_error("L2 on one node", "at least two nodes");
  unsetenv("CAIRN_L2_EVERY");
  free(buf);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (argc != 2 || (strcmp(argv[1], "restart") != 0 && strcmp(argv[1], "config") != 0 &&
                    strcmp(argv[1], "persistent") != 0 && strcmp(argv[1], "l2") != 0)) {
    if (g_rank == 0) fprintf(stderr, "usage: mpi_test restart|persistent|config|l2\n");
    MPI_Finalize();
    return 2;
  }
  setup();
  if (strcmp(argv[1], "restart") == 0) test_restart();
  else if (strcmp(argv[1], "persistent") == 0) test_persistent();
  else if (strcmp(argv[1], "l2") == 0) test_l2();
  else test_config();
  cleanup();
  int failures = g_failures;
  MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) printf("mpi_test %s on %d ranks: %d failures\n", argv[1], g_size, failures);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
