/* MPI tests of the parity level (L3: XOR and Reed-Solomon) and CAIRN_L4_EVERY (docs/mpi.md),
 * run by ctest under mpirun with 4 and 8 ranks, every rank on its own
 * simulated node (CAIRN_MPI_RANKS_PER_NODE=1; the default set size is 4):
 *
 *   l3_test node     CAIRN_L3_EVERY=1 with L2 off: parity files after each
 *                    collective wait; node 1's whole directory deleted: the
 *                    restart rebuilds rank 1's files from its set's parity,
 *                    byte-identical, restores byte-exact, rank 1 alone logs
 *                    (L3) and counts mpi_restored_l3; a damaged file is
 *                    rebuilt by restore(v) and by restore_latest; rank 1's
 *                    own parity comes back with its rebuild, so node 2
 *                    lost next (no wait between) is rebuilt from L3 too
 *   l3_test two      CAIRN_L4_EVERY=2: of versions 1-3 only the second
 *                    goes to the persistent directory (no file of version
 *                    3 there) and its wait makes it a persistent global
 *                    commit (manifests); nodes 1 and 2 (one set) lost:
 *                    every rank says which set lost which ranks, and the
 *                    job falls back together to version 2, ranks 1 and 2
 *                    from their persistent files, byte-exact, counted as L4
 *   l3_test damaged  (with L4 on every wait) node 1 lost and, mid-stream of
 *                    its rebuild, a survivor's parity chunk damaged (rank
 *                    2), then a survivor's own file damaged where the
 *                    rebuild reads it (rank 3): the rebuild is refused, nothing is left in node 1's
 *                    directory, the job restores byte-exact from the other
 *                    levels (not L3) and the damaged rank names its file
 *   l3_test config   L3_GROUP larger than the nodes, 1, non-numeric or
 *                    differing; L3_PARITY 2 with xor, rs with sets of 2,
 *                    differing L3_CODE; L4 without a persistent directory:
 *                    CAIRN_ERR_CONFIG on every rank
 *   l3_test rs       CAIRN_L3_CODE=rs (Reed-Solomon, e = 2): two nodes of
 *                    a set lost together are rebuilt byte-exact and their
 *                    parity encoded again; the other two lost next, too
 *   l3_test l2       L2 on too: node 1 lost, rank 1 restored from its
 *                    partner's copy (L2) and its own parity of the version
 *                    encoded again; node 2 (same set) lost next, with L2
 *                    off, is rebuilt from L3, which needs that parity
 *   l3_test older    MPI_THREAD_MULTIPLE (the encoder in the background):
 *                    node 1 lost, version 3 restored; rank 1's older
 *                    versions and its own parity of them come back in the
 *                    background, byte-identical; node 2 (same set) lost
 *                    next is rebuilt from L3 at version 2 too, which needs
 *                    them
 *   l3_test older_l2 the same with L2 alone (L3 off): rank 1's older
 *                    versions come back from its partner's copies
 *
 * With CAIRN_CHANGES=hash (mpi_l3_layered) versions 2.. are layered on
 * version 1 (a third of the region changes) and what is rebuilt is a chain.
 */
#include <dirent.h>
#include <sys/stat.h>

#include "manifest_read.h"
#include "mpi_common.h"

/* Version v's content on this rank: the first third never changes (so that
 * hash change detection layers versions), the rest does. */
static unsigned char content(size_t i, int64_t v) {
  return (unsigned char)(i * 31 + (size_t)g_rank * 13 + (i >= kBytes / 3 ? (size_t)v * 7 : 0));
}
static void fill(unsigned char *buf, int64_t v) {
  for (size_t i = 0; i < kBytes; ++i) buf[i] = content(i, v);
}
static int holds(const unsigned char *buf, int64_t v) {
  for (size_t i = 0; i < kBytes; ++i)
    if (buf[i] != content(i, v)) return 0;
  return 1;
}

static void path_of(char *out, size_t n, const char *sub, int64_t v) {
  snprintf(out, n, "%s/scratch/node%d/rank%d/%sstate/v%020lld.cairn", g_root, g_rank, g_rank, sub, (long long)v);
}

static cairn_stats_t stats_of(cairn_client_t *c) {
  cairn_stats_t st = CAIRN_STATS_INIT;
  int rc = cairn_stats(c, &st);
  CHECK(rc == CAIRN_OK, "cairn_stats: %d", rc);
  return st;
}

/* Node `node` is lost (its whole directory); the job reopens and restores
 * the latest version collectively: its rc, version and this rank's log. */
static cairn_client_t *reopen_after_losing(int node, unsigned char *buf, int *rc, int64_t *got, char *log,
                                           size_t cap) {
  lose_nodes(node, -1);
  memset(buf, 0, kBytes);
  cairn_client_t *c = open_client(buf);
  *rc = restore_logged(c, -1, got, log, cap);
  return c;
}

static void save(cairn_client_t *c, unsigned char *buf, int64_t first, int64_t last) {
  for (int64_t v = first; v <= last; ++v) {
    fill(buf, v);
    int rc = cairn_checkpoint(c, "state", v);
    CHECK(rc == CAIRN_OK, "checkpoint %lld: %d", (long long)v, rc);
    rc = cairn_wait(c, "state", v, CAIRN_LEVEL_LOCAL);
    CHECK(rc == CAIRN_OK, "collective wait %lld with L3: %d", (long long)v, rc);
  }
}

static void test_node(void) {
  unsigned char *buf = malloc(kBytes);
  char path[4400], log[4096];
  cairn_client_t *c = open_client(buf);
  save(c, buf, 1, 3);
  cairn_stats_t st = stats_of(c);
  CHECK(st.mpi_l3_parity_writes == 3 && st.mpi_l3_parity_bytes > 0 && st.mpi_l2_copies == 0,
        "stats after 3 L3 waits: %llu parity files, %llu bytes, %llu L2 copies",
        (unsigned long long)st.mpi_l3_parity_writes, (unsigned long long)st.mpi_l3_parity_bytes,
        (unsigned long long)st.mpi_l2_copies);
  if (getenv("CAIRN_CHANGES") != NULL)
    CHECK(st.changes_layered_versions >= 2, "CAIRN_CHANGES=hash: %llu layered versions, want >= 2",
          (unsigned long long)st.changes_layered_versions);
  CHECK(cairn_close(c) == CAIRN_OK, "close");
  path_of(path, sizeof path, ".xor/", 3);
  CHECK(access(path, F_OK) == 0, "parity file %s missing", path);

  /* Node 1 is lost; rank 1 keeps what its file was, to compare. */
  size_t n_before = 0, n_after = 0;
  path_of(path, sizeof path, "", 3);
  unsigned char *before = g_rank == 1 ? slurp(path, &n_before) : NULL;
  int64_t got = -1;
  int rc = 0;
  c = reopen_after_losing(1, buf, &rc, &got, log, sizeof log);
  CHECK(rc == CAIRN_OK && got == 3, "restore_latest after losing node 1: rc %d, version %lld", rc, (long long)got);
  CHECK(holds(buf, 3), "version 3 is not byte-exact after the rebuild from L3");
  CHECK(all_equal(got), "ranks restored different versions");
  CHECK((strstr(log, "rebuilt from the XOR parity") != NULL && strstr(log, "(L3)") != NULL) == (g_rank == 1),
        "which level served: rank %d's log says '%s'", g_rank, log);
  st = stats_of(c);
  CHECK(st.mpi_restored_l3 == (g_rank == 1) && st.mpi_restored_local == (g_rank != 1) &&
            st.mpi_l3_rebuilds == (g_rank == 1),
        "stats: restored local %llu, l3 %llu, rebuilds %llu", (unsigned long long)st.mpi_restored_local,
        (unsigned long long)st.mpi_restored_l3, (unsigned long long)st.mpi_l3_rebuilds);
  if (g_rank == 1) {
    unsigned char *after = slurp(path, &n_after);
    CHECK(before && after && n_before == n_after && memcmp(before, after, n_before) == 0,
          "the rebuilt %s is not the lost file", path);
    free(after);
  }
  free(before);

  /* Rank 1's rebuilt file is damaged (a data byte): restore(3) rebuilds it
   * again (the others' parity survived) and succeeds everywhere. */
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 1) flip_byte(path, 4096 + 1000, 0x21);
  MPI_Barrier(MPI_COMM_WORLD);
  memset(buf, 0, kBytes);
  rc = restore_logged(c, 3, &got, log, sizeof log);
  CHECK(rc == CAIRN_OK && holds(buf, 3), "restore(3) with rank 1's copy damaged: rc %d", rc);
  CHECK((strstr(log, "(L3)") != NULL) == (g_rank == 1), "restore(3): rank %d's log says '%s'", g_rank, log);
  /* The same found by restore_latest: version 3 again, not 2. */
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 1) flip_byte(path, 4096 + 20000, 0x21);
  MPI_Barrier(MPI_COMM_WORLD);
  memset(buf, 0, kBytes);
  rc = restore_logged(c, -1, &got, log, sizeof log);
  CHECK(rc == CAIRN_OK && got == 3 && holds(buf, 3), "restore_latest with rank 1's copy damaged: rc %d, version %lld",
        rc, (long long)got);
  CHECK((strstr(log, "(L3)") != NULL) == (g_rank == 1), "restore_latest: rank %d's log says '%s'", g_rank, log);
  CHECK(cairn_close(c) == CAIRN_OK, "close");

  /* Rank 1's own parity of version 3, lost with node 1, was encoded again
   * with its rebuild: node 2 (same set) lost now, with no wait in between,
   * is rebuilt from L3 as well. */
  path_of(path, sizeof path, ".xor/", 3);
  if (g_rank == 1) {
    CHECK(access(path, F_OK) == 0, "rank 1's parity %s is not back after its rebuild", path);
    CHECK(strstr(log, "encoded again") != NULL, "rank 1's log does not say its parity was encoded again: '%s'", log);
  }
  c = reopen_after_losing(2, buf, &rc, &got, log, sizeof log);
  CHECK(rc == CAIRN_OK && got == 3 && holds(buf, 3), "restore_latest after losing node 2 too: rc %d, version %lld", rc,
        (long long)got);
  CHECK((strstr(log, "rebuilt from the XOR parity") != NULL) == (g_rank == 2),
        "second loss: rank %d's log says '%s'", g_rank, log);
  CHECK(cairn_close(c) == CAIRN_OK, "close");
  free(buf);
}

static void test_two(void) {
  unsigned char *buf = malloc(kBytes);
  char dir[4200], log[4096];
  snprintf(dir, sizeof dir, "%s/persistent", g_root);
  setenv("CAIRN_PERSISTENT", dir, 1);
  setenv("CAIRN_L4_EVERY", "2", 1);
  cairn_client_t *c = open_client(buf);
  save(c, buf, 1, 3);
  CHECK(stats_of(c).mpi_l4_waits == 1, "mpi_l4_waits is not 1");
  CHECK(cairn_close(c) == CAIRN_OK, "close");
  /* Only the second version went to the persistent tier, and its wait made
   * it a persistent global commit: the manifests record it. */
  char mpath[4400], text[256], want[160];
  snprintf(mpath, sizeof mpath, "%s/rank%d/state/v%020lld.cairn", dir, g_rank, 3LL);
  CHECK(access(mpath, F_OK) != 0, "CAIRN_L4_EVERY=2: version 3 was written to the persistent tier (%s)", mpath);
  snprintf(mpath, sizeof mpath, "%s/rank%d/state/v%020lld.cairn", dir, g_rank, 2LL);
  CHECK(access(mpath, F_OK) == 0, "CAIRN_L4_EVERY=2: version 2 is not in the persistent tier (%s)", mpath);
  snprintf(mpath, sizeof mpath, "%s/rank%d/state/global", dir, g_rank);
  test_manifest_text(mpath, text, sizeof text);
  snprintf(want, sizeof want, "ranks %d committed 2 persistent 2 ranks_per_node 1", g_size);
  CHECK(strcmp(text, want) == 0, "CAIRN_L4_EVERY=2: manifest %s is '%s', want '%s'", mpath, text, want);

  /* Nodes 1 and 2, both in the set of ranks 0-3, are lost. */
  lose_nodes(1, 2);
  memset(buf, 0, kBytes);
  c = open_client(buf);
  int64_t got = -1;
  int rc = restore_logged(c, -1, &got, log, sizeof log);
  CHECK(rc == CAIRN_OK && got == 2, "restore_latest after losing nodes 1 and 2: rc %d, version %lld, want 2", rc,
        (long long)got);
  CHECK(holds(buf, 2), "version 2 is not byte-exact after the fall back to L4");
  CHECK(strstr(log, "the XOR set of ranks 0, 1, 2, 3 lost ranks 1, 2") != NULL &&
            strstr(log, "persistent level (L4)") != NULL,
        "rank %d's log does not name the set and its lost ranks: '%s'", g_rank, log);
  cairn_stats_t st = stats_of(c);
  const int lost = g_rank == 1 || g_rank == 2;
  CHECK(st.mpi_restored_l4 == (unsigned)lost && st.mpi_restored_local == (unsigned)!lost && st.mpi_restored_l3 == 0,
        "stats: restored local %llu, l3 %llu, l4 %llu", (unsigned long long)st.mpi_restored_local,
        (unsigned long long)st.mpi_restored_l3, (unsigned long long)st.mpi_restored_l4);
  CHECK(cairn_close(c) == CAIRN_OK, "close");
  unsetenv("CAIRN_L4_EVERY");
  unsetenv("CAIRN_PERSISTENT");
  free(buf);
}

static long size_of(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Node 1 lost, and `damaged`'s file `sub` of version v flipped where the
 * rebuild reads it (inside the parity chunk, or data another survivor's
 * parity covers): rank 1's rebuild of v must be refused, the damaged rank
 * must name its file, whatever the job then restores must be byte-exact,
 * and not from L3. */
static void lose_and_damage(unsigned char *buf, int64_t v, int damaged, const char *sub, const char *says) {
  char path[4400], log[4096], dir[4400];
  lose_nodes(1, -1);
  if (g_rank == damaged) {
    path_of(path, sizeof path, sub, v);
    const long size = size_of(path);
    CHECK(size > 0, "%s missing", path);
    /* A parity file in its middle. A data file in its first sixth: the
     * rebuild of rank 1 reads only the two chunks of a survivor's bundle
     * that the other survivors' parity covers (not the one rank 1's parity
     * holds), and for rank 3 the unused one is the middle third. */
    if (size > 0) flip_byte(path, sub[0] ? size / 2 : size / 6, 0x21);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  memset(buf, 0, kBytes);
  cairn_client_t *c = open_client(buf);
  int64_t got = -1;
  int rc = restore_logged(c, -1, &got, log, sizeof log);
  CHECK(rc == CAIRN_OK && got >= 1 && holds(buf, got), "restore_latest with %s damaged on rank %d: rc %d, version %lld",
        sub[0] ? "the parity" : "the file", damaged, rc, (long long)got);
  CHECK(all_equal(got), "ranks restored different versions");
  CHECK(strstr(log, "(L3)") == NULL, "rank %d was served by L3 from a damaged set: '%s'", g_rank, log);
  if (g_rank == 1)
    CHECK(strstr(log, "cannot be rebuilt from the XOR parity") != NULL, "rank 1's log does not say the rebuild was refused: '%s'",
          log);
  if (g_rank == damaged) CHECK(strstr(log, says) != NULL, "rank %d's log does not say '%s': '%s'", g_rank, says, log);
  cairn_stats_t st = stats_of(c);
  CHECK(st.mpi_restored_l3 == 0 && st.mpi_l3_rebuilds == 0, "stats: l3 restores %llu, rebuilds %llu",
        (unsigned long long)st.mpi_restored_l3, (unsigned long long)st.mpi_l3_rebuilds);
  /* A refused rebuild leaves no file (nor temp file) of v behind. */
  if (g_rank == 1) {
    snprintf(dir, sizeof dir, "%s/scratch/node1/rank1/state", g_root);
    DIR *d = opendir(dir);
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
      char name[64];
      snprintf(name, sizeof name, "%020lld", (long long)v);
      CHECK(strstr(e->d_name, name) == NULL || got == v, "a refused rebuild left %s/%s", dir, e->d_name);
    }
    if (d) closedir(d);
  }
  CHECK(cairn_close(c) == CAIRN_OK, "close");
}

static void test_damaged(void) {
  unsigned char *buf = malloc(kBytes);
  char dir[4200];
  snprintf(dir, sizeof dir, "%s/persistent", g_root);
  setenv("CAIRN_PERSISTENT", dir, 1);
  setenv("CAIRN_L4_EVERY", "1", 1);
  cairn_client_t *c = open_client(buf);
  save(c, buf, 1, 3);
  CHECK(cairn_close(c) == CAIRN_OK, "close");
  lose_and_damage(buf, 3, 2, ".xor/", "checksum does not match");
  c = open_client(buf);
  save(c, buf, 4, 4);
  CHECK(cairn_close(c) == CAIRN_OK, "close");
  lose_and_damage(buf, 4, 3, "", "is not what its XOR parity protects");
  unsetenv("CAIRN_L4_EVERY");
  unsetenv("CAIRN_PERSISTENT");
  free(buf);
}

static void test_config(void) {
  char text[32];
  snprintf(text, sizeof text, "%d", g_size + 1);
  setenv("CAIRN_L3_GROUP", text, 1);
  expect_config_error("CAIRN_L3_GROUP larger than the nodes", "must not exceed the number of nodes");
  setenv("CAIRN_L3_GROUP", "1", 1);
  expect_config_error("CAIRN_L3_GROUP 1", "more members than the 1 lost ones");
  setenv("CAIRN_L3_GROUP", g_rank == 0 ? "2" : "4", 1);
  expect_config_error("CAIRN_L3_GROUP differing", "mpi.l3_group (CAIRN_L3_GROUP)");
  unsetenv("CAIRN_L3_GROUP");
  /* The code: XOR rebuilds one member; RS needs more members than e. */
  setenv("CAIRN_L3_PARITY", "2", 1);
  expect_config_error("CAIRN_L3_PARITY 2 with xor", "mpi.l3_code = rs rebuilds more");
  setenv("CAIRN_L3_CODE", "rs", 1);
  setenv("CAIRN_L3_GROUP", "2", 1);
#if CAIRN_TEST_HAVE_ISAL
  expect_config_error("CAIRN_L3_CODE=rs with sets of 2", "more members than the 2 lost ones");
#else
  expect_config_error("CAIRN_L3_CODE=rs without ISA-L", "needs Intel's ISA-L");
#endif
  unsetenv("CAIRN_L3_GROUP");
  unsetenv("CAIRN_L3_PARITY");
  setenv("CAIRN_L3_CODE", g_rank == 0 ? "rs" : "xor", 1);
  expect_config_error("CAIRN_L3_CODE differing", "mpi.l3_code (CAIRN_L3_CODE)");
  unsetenv("CAIRN_L3_CODE");
  setenv("CAIRN_L3_EVERY", g_rank == g_size - 1 ? "x1" : "1", 1);
  char last[32];
  snprintf(last, sizeof last, "rank %d", g_size - 1);
  expect_config_error("CAIRN_L3_EVERY not a number", g_rank == g_size - 1 ? "CAIRN_L3_EVERY='x1'" : last);
  setenv("CAIRN_L3_EVERY", "1", 1);
  setenv("CAIRN_L4_EVERY", "1", 1);
  expect_config_error("CAIRN_L4_EVERY without a persistent directory", "no persistent directory");
  unsetenv("CAIRN_L4_EVERY");
  /* All ranks on one node: no set can have distinct nodes. */
  snprintf(text, sizeof text, "%d", g_size);
  setenv("CAIRN_MPI_RANKS_PER_NODE", text, 1);
  expect_config_error("L3 on one node", "distinct nodes");
  setenv("CAIRN_MPI_RANKS_PER_NODE", "1", 1);
}

/* CAIRN_L3_CODE=rs (e = 2, sets of 4): nodes 1 and 2 lost together are
 * rebuilt from their set's Reed-Solomon parity, byte-exact, and their
 * parity encoded again, so that nodes 0 and 3 lost next are rebuilt too. */
static void test_rs(void) {
  unsigned char *buf = malloc(kBytes);
  char path[4400], log[4096];
  setenv("CAIRN_L3_CODE", "rs", 1);
  cairn_client_t *c = open_client(buf);
  save(c, buf, 1, 3);
  cairn_stats_t st = stats_of(c);
  CHECK(st.mpi_l3_parity_writes == 3 && st.mpi_l3_parity_bytes > 0, "stats after 3 RS waits: %llu parity files",
        (unsigned long long)st.mpi_l3_parity_writes);
  CHECK(cairn_close(c) == CAIRN_OK, "close");
  path_of(path, sizeof path, ".rs/", 3);
  CHECK(access(path, F_OK) == 0, "parity file %s missing", path);
  for (int round = 0; round < 2; ++round) {
    const int a = round == 0 ? 1 : 0, b = round == 0 ? 2 : 3;
    const int lost = g_rank % 4 == a || g_rank % 4 == b;
    lose_nodes(a, b);
    if (g_size >= 8) lose_nodes(a + 4, b + 4);
    memset(buf, 0, kBytes);
    c = open_client(buf);
    int64_t got = -1;
    int rc = restore_logged(c, -1, &got, log, sizeof log);
    CHECK(rc == CAIRN_OK && got == 3 && holds(buf, 3),
          "round %d: restore_latest after losing nodes %d and %d: rc %d, version %lld", round, a, b, rc,
          (long long)got);
    CHECK(all_equal(got), "ranks restored different versions");
    CHECK((strstr(log, "rebuilt from the Reed-Solomon parity") != NULL) == lost, "round %d: rank %d's log says '%s'",
          round, g_rank, log);
    if (lost) CHECK(strstr(log, "encoded again") != NULL, "rank %d's parity not encoded again: '%s'", g_rank, log);
    st = stats_of(c);
    CHECK(st.mpi_restored_l3 == (unsigned)lost && st.mpi_l3_rebuilds == (unsigned)lost,
          "round %d stats: restored l3 %llu, rebuilds %llu", round, (unsigned long long)st.mpi_restored_l3,
          (unsigned long long)st.mpi_l3_rebuilds);
    CHECK(cairn_close(c) == CAIRN_OK, "close");
    CHECK(access(path, F_OK) == 0, "round %d: rank %d's parity %s is not back", round, g_rank, path);
  }
  unsetenv("CAIRN_L3_CODE");
  free(buf);
}

/* Versions 1-3 saved, node 1 lost, the job restores version 3 (rank 1 from
 * `level`, a line of its log) and closes after the recovery in the
 * background: rank 1's versions 2 and 1 are back (and its parity of them,
 * with `parity`), version 2 byte-identical to the lost file. */
static void lose_node1_and_expect_older_back(unsigned char *buf, const char *level, int parity) {
  char path[4400], log[4096];
  cairn_client_t *c = open_client(buf);
  save(c, buf, 1, 3);
  CHECK(cairn_close(c) == CAIRN_OK, "close"); /* after the encodings and copies in the background */
  size_t n_before = 0, n_after = 0;
  path_of(path, sizeof path, "", 2);
  unsigned char *before = g_rank == 1 ? slurp(path, &n_before) : NULL;
  int64_t got = -1;
  int rc = 0;
  c = reopen_after_losing(1, buf, &rc, &got, log, sizeof log);
  CHECK(rc == CAIRN_OK && got == 3 && holds(buf, 3), "restore_latest after losing node 1: rc %d, version %lld", rc,
        (long long)got);
  CHECK((strstr(log, level) != NULL) == (g_rank == 1), "rank %d's log says '%s'", g_rank, log);
  CHECK(cairn_close(c) == CAIRN_OK, "close"); /* after the recovery in the background */
  if (g_rank == 1) {
    for (int64_t v = 1; v <= 2; ++v) {
      path_of(path, sizeof path, "", v);
      CHECK(access(path, F_OK) == 0, "rank 1's version %lld is not back: %s", (long long)v, path);
      path_of(path, sizeof path, ".xor/", v);
      CHECK(!parity || access(path, F_OK) == 0, "rank 1's parity of version %lld is not back: %s", (long long)v,
            path);
    }
    path_of(path, sizeof path, "", 2);
    unsigned char *after = slurp(path, &n_after);
    CHECK(before && after && n_before == n_after && memcmp(before, after, n_before) == 0,
          "the version 2 brought back, %s, is not the lost file", path);
    free(after);
  }
  free(before);
}

/* After node 1's loss, rank 1 had only version 3 back; its older versions
 * come back in the background (keep_versions 4: versions 2 and 1), with its
 * parity of them, so that a second loss in its set is rebuilt at those
 * versions as well. */
static void test_older(void) {
  unsigned char *buf = malloc(kBytes);
  char log[4096];
  int64_t got = -1;
  lose_node1_and_expect_older_back(buf, "rebuilt from the XOR parity", 1);
  lose_nodes(2, -1);
  memset(buf, 0, kBytes);
  cairn_client_t *c = open_client(buf);
  int rc = restore_logged(c, 2, &got, log, sizeof log);
  CHECK(rc == CAIRN_OK && holds(buf, 2), "restore(2) after losing node 2 too: rc %d", rc);
  CHECK((strstr(log, "rebuilt from the XOR parity") != NULL) == (g_rank == 2), "restore(2): rank %d's log says '%s'",
        g_rank, log);
  CHECK(cairn_close(c) == CAIRN_OK, "close");
  free(buf);
}

/* With L2 alone: node 1 lost, rank 1 gets version 3 back from its
 * partner's copy, and its older versions (2 and 1) from its partner's
 * copies in the background, byte-identical. */
static void test_older_l2(void) {
  unsigned char *buf = malloc(kBytes);
  setenv("CAIRN_L2_EVERY", "1", 1);
  setenv("CAIRN_L3_EVERY", "0", 1);
  lose_node1_and_expect_older_back(buf, "from its partner copy", 0);
  unsetenv("CAIRN_L2_EVERY");
  setenv("CAIRN_L3_EVERY", "1", 1);
  free(buf);
}

/* A rank restored from its partner's copy (L2) gets its own parity back. */
static void test_l2(void) {
  unsigned char *buf = malloc(kBytes);
  char path[4400], log[4096];
  setenv("CAIRN_L2_EVERY", "1", 1);
  cairn_client_t *c = open_client(buf);
  save(c, buf, 1, 3);
  CHECK(cairn_close(c) == CAIRN_OK, "close");
  int64_t got = -1;
  int rc = 0;
  c = reopen_after_losing(1, buf, &rc, &got, log, sizeof log);
  CHECK(rc == CAIRN_OK && got == 3 && holds(buf, 3), "restore_latest after losing node 1: rc %d, version %lld", rc,
        (long long)got);
  CHECK((strstr(log, "from its partner copy") != NULL) == (g_rank == 1), "rank %d's log says '%s'", g_rank, log);
  if (g_rank == 1) {
    CHECK(strstr(log, "XOR parity encoded again") != NULL, "rank 1's log does not say its parity was encoded again: '%s'",
          log);
    path_of(path, sizeof path, ".xor/", 3);
    CHECK(access(path, F_OK) == 0, "rank 1's parity %s is not back", path);
  }
  CHECK(cairn_close(c) == CAIRN_OK, "close");
  unsetenv("CAIRN_L2_EVERY");
  c = reopen_after_losing(2, buf, &rc, &got, log, sizeof log);
  CHECK(rc == CAIRN_OK && got == 3 && holds(buf, 3), "restore_latest after losing node 2 too: rc %d, version %lld", rc,
        (long long)got);
  CHECK((strstr(log, "rebuilt from the XOR parity") != NULL) == (g_rank == 2), "second loss: rank %d's log says '%s'",
        g_rank, log);
  CHECK(cairn_close(c) == CAIRN_OK, "close");
  free(buf);
}

int main(int argc, char **argv) {
  /* older: Cairn's progress threads, which need MPI_THREAD_MULTIPLE. */
  int provided = 0;
  const int threads =
      argc == 2 && (strcmp(argv[1], "older") == 0 || strcmp(argv[1], "older_l2") == 0);
  MPI_Init_thread(&argc, &argv, threads ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (argc != 2 ||
      (strcmp(argv[1], "node") != 0 && strcmp(argv[1], "two") != 0 &&
       strcmp(argv[1], "damaged") != 0 && strcmp(argv[1], "config") != 0 &&
       strcmp(argv[1], "rs") != 0 && strcmp(argv[1], "older") != 0 &&
       strcmp(argv[1], "older_l2") != 0 && strcmp(argv[1], "l2") != 0) ||
      g_size < 4) {
    if (g_rank == 0)
      fprintf(stderr,
              "usage: l3_test node|two|damaged|config|rs|older|older_l2|l2 (on 4 or more ranks)\n");
    MPI_Finalize();
    return 2;
  }
  setup();
  setenv("CAIRN_MPI_RANKS_PER_NODE", "1", 1);
  setenv("CAIRN_L3_EVERY", "1", 1);
  unsetenv("CAIRN_L2_EVERY");
  if (strcmp(argv[1], "node") == 0) test_node();
  else if (strcmp(argv[1], "two") == 0) test_two();
  else if (strcmp(argv[1], "damaged") == 0) test_damaged();
  else if (strcmp(argv[1], "rs") == 0) test_rs();
  else if (strcmp(argv[1], "older") == 0) test_older();
  else if (strcmp(argv[1], "older_l2") == 0)
    test_older_l2();
  else if (strcmp(argv[1], "l2") == 0) test_l2();
  else test_config();
  cleanup();
  int failures = g_failures;
  MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) printf("l3_test %s on %d ranks: %d failures\n", argv[1], g_size, failures);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
