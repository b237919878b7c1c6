/* cairn-bench-xor-rebuild: how long rebuilding one lost node from XOR parity
 * (L3) takes next to reading the same rank's data from its local files
 * (the closing note: rebuild <= 2x the local read; docs/mpi.md). With
 * CAIRN_L3_CODE=rs in the environment the sets are Reed-Solomon (e = 2 by
 * default) and nodes 1 and 2 are lost together: rank 1's figures are then
 * those of a rebuild of two members.
 *
 *   mpirun -np 4 cairn-bench-xor-rebuild [MiB per rank, 32] [trials, 3] [warm|cold]
 *
 * Every rank is its own simulated node (CAIRN_MPI_RANKS_PER_NODE=1; one XOR
 * set of min(4, ranks)), CAIRN_L3_EVERY=1, L2 off. Each rank checkpoints
 * MiB of data trials + 1 times, each followed by a collective wait that
 * writes the parity (the encoding):
 *   l3_wait_s      the slowest rank's wait, versions 2 .. trials + 1 (the
 *                  first one's ran beside the host cache's background touch):
 *                  the local commit, the global record and the encoding
 *   l3_encode_s    the slowest rank's part of it in the encoding (the
 *                  delta of its mpi_l3_encode_s): exchange, XOR, the parity
 *                  file's write and fsync
 *   l3_wait_anon_mib  the most anonymous memory (resident minus file-backed,
 *                  /proc/self/statm, sampled every ms by a thread) any rank
 *                  held during those waits above what it held before them:
 *                  what the encoding allocates
 * Then, per trial, on freshly opened clients (the host cache is empty, so
 * restores read files):
 *   local_read_s   rank 1's collective restore_latest with its files present
 *                  (every rank restores its own; blocks' CRCs are checked)
 *   rebuild_s      node 1's directory deleted: rank 1's mpi_l3_rebuild_s,
 *                  the recovery that rebuilds, checks (CRCs of the parity,
 *                  the survivors' files and the rebuilt file) and commits
 *                  (fsync) its files
 *   restore_s      rank 1's whole collective restore_latest after the loss
 *                  (rebuild + reading the rebuilt file)
 * and prints the medians and rebuild_s / local_read_s as one JSON line.
 * Both sides of the ratio start from the same page-cache state:
 *   warm (default) every rank reads all files of its node's directory
 *                  (untimed) before each timing, and the restores read
 *                  buffered (CAIRN_DIRECT_IO=0): the local read and the
 *                  survivors' reads come from memory alike. With O_DIRECT
 *                  (restores' default) the local read would go to the disk
 *                  while the survivors' reads hit the page cache: a ratio
 *                  that flatters the rebuild (0.65 against 2.0 on one VM).
 *   cold           rank 0 writes 3 to /proc/sys/vm/drop_caches (root) before
 *                  each timing and restores keep their O_DIRECT default: both
 *                  sides read the disk. The simulated nodes share one disk,
 *                  so the survivors' reads (4/3 of a file each) queue on it
 *                  behind each other, which no job of real nodes sees, and
 *                  dropping the caches disturbs other work on the machine.
 * The rebuild's write is durable (fsync on, the default); the read writes
 * nothing. Files live under $TMPDIR (default /tmp).
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cairn/cairn_mpi.h"
#include "mpi/mpi_bench_util.h"

static int g_rank;
static int64_t g_newest; /* the version every restore finds */

static cairn_client_t *open_client(void *buf, size_t bytes) {
  cairn_client_t *c = NULL;
  int rc = cairn_open_mpi(MPI_COMM_WORLD, NULL, &c);
  if (rc != CAIRN_OK) die("cairn_open_mpi", rc);
  if ((rc = cairn_protect(c, 0, buf, bytes)) != CAIRN_OK) die("cairn_protect", rc);
  return c;
}

/* Before each timing: warm, every file under a node's directory read once
 * (untimed); cold, the machine's page cache dropped (see the top). */
static int g_cold;
static char g_warm_buf[1 << 20];
static int warm_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  if (type != FTW_F) return 0;
  int fd = open(path, O_RDONLY);
  if (fd < 0) return 0;
  while (read(fd, g_warm_buf, sizeof g_warm_buf) > 0) {
  }
  close(fd);
  return 0;
}
static void same_start(const char *scratch) {
  if (!g_cold) {
    char node[4300];
    snprintf(node, sizeof node, "%s/node%d", scratch, g_rank);
    nftw(node, warm_one, 16, FTW_PHYS);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_cold && g_rank == 0) {
    sync();
    FILE *f = fopen("/proc/sys/vm/drop_caches", "w");
    if (f == NULL || fputs("3\n", f) < 0 || fclose(f) != 0)
      die("cold: cannot write /proc/sys/vm/drop_caches (needs root)", -1);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/* The phases of a rebuild (cairn_stats_t's mpi_l3_*_s; docs/mpi.md
 * "Measuring a rebuild"), as the JSON names them. */
enum { kPhases = 7 };
static const char *const kPhaseNames[kPhases] = {"read_s", "exchange_s", "xor_s", "crc_s",
                                                 "write_s", "write_wait_s", "sync_s"};
static void phases_of(const cairn_stats_t *st, double *out) {
  const double v[kPhases] = {st->mpi_l3_read_s,  st->mpi_l3_exchange_s,   st->mpi_l3_xor_s,
                             st->mpi_l3_crc_s,   st->mpi_l3_write_s,      st->mpi_l3_write_wait_s,
                             st->mpi_l3_sync_s};
  memcpy(out, v, sizeof v);
}

/* Anonymous memory sampled while a wait runs (see the top). */
static atomic_int g_sampling;
static atomic_long g_anon_peak; /* pages */
static long anon_pages(int fd) {
  char text[128];
  const ssize_t n = pread(fd, text, sizeof text - 1, 0);
  long size = 0, resident = 0, shared = 0;
  if (n <= 0) return 0;
  text[n] = '\0';
  if (sscanf(text, "%ld %ld %ld", &size, &resident, &shared) != 3) return 0;
  return resident - shared;
}
static void *sample_anon(void *arg) {
  (void)arg;
  const int fd = open("/proc/self/statm", O_RDONLY);
  if (fd < 0) return NULL;
  const struct timespec ms = {0, 1000000};
  while (atomic_load(&g_sampling)) {
    const long now = anon_pages(fd);
    if (now > atomic_load(&g_anon_peak)) atomic_store(&g_anon_peak, now);
    nanosleep(&ms, NULL);
  }
  close(fd);
  return NULL;
}

/* Checkpoints versions 1 .. n + 1, each followed by a collective wait (the
 * L3 encoding); the slowest rank's median wait over versions 2 .. n + 1 and
 * the most anonymous memory any rank's waits added (MiB). */
static void timed_encodings(cairn_client_t *c, int n, double *wait_s, double *encode_s, double *anon_mib) {
  double waits[101], encodes[101], encoded = 0;
  const int fd = open("/proc/self/statm", O_RDONLY);
  long before = 0;
  pthread_t sampler;
  for (int v = 1; v <= n + 1; ++v) {
    int rc = cairn_checkpoint(c, "bench", v);
    if (rc != CAIRN_OK) die("cairn_checkpoint", rc);
    MPI_Barrier(MPI_COMM_WORLD);
    if (v == 2) {
      before = anon_pages(fd);
      atomic_store(&g_anon_peak, before);
      atomic_store(&g_sampling, 1);
      if (pthread_create(&sampler, NULL, sample_anon, NULL) != 0) die("pthread_create", -1);
    }
    const double t0 = MPI_Wtime();
    if ((rc = cairn_wait(c, "bench", v, CAIRN_LEVEL_LOCAL)) != CAIRN_OK) die("cairn_wait (with L3)", rc);
    double mine[2] = {MPI_Wtime() - t0, 0}, slowest[2] = {0, 0};
    cairn_stats_t st = CAIRN_STATS_INIT;
    if ((rc = cairn_stats(c, &st)) != CAIRN_OK) die("cairn_stats", rc);
    mine[1] = st.mpi_l3_encode_s - encoded;
    encoded = st.mpi_l3_encode_s;
    MPI_Allreduce(mine, slowest, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (v >= 2) {
      waits[v - 2] = slowest[0];
      encodes[v - 2] = slowest[1];
    }
  }
  atomic_store(&g_sampling, 0);
  pthread_join(sampler, NULL);
  close(fd);
  double grew = (double)(atomic_load(&g_anon_peak) - before) * (double)sysconf(_SC_PAGESIZE) / (1 << 20), most = 0;
  MPI_Allreduce(&grew, &most, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  *wait_s = median(waits, n);
  *encode_s = median(encodes, n);
  *anon_mib = most;
}

/* This rank's time of one collective restore_latest on a fresh client, its
 * mpi_l3_rebuild_s and the phases of the rebuild it took part in. */
static void timed_restore(void *buf, size_t bytes, double *restore_s, double *rebuild_s, double *phases) {
  cairn_client_t *c = open_client(buf, bytes);
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  int64_t got = -1;
  int rc = cairn_restore_latest(c, "bench", &got);
  const double t1 = MPI_Wtime();
  if (rc != CAIRN_OK || got != g_newest) die("cairn_restore_latest", rc);
  cairn_stats_t st = CAIRN_STATS_INIT;
  if ((rc = cairn_stats(c, &st)) != CAIRN_OK) die("cairn_stats", rc);
  *restore_s = t1 - t0;
  *rebuild_s = st.mpi_l3_rebuild_s;
  phases_of(&st, phases);
  if ((rc = cairn_close(c)) != CAIRN_OK) die("cairn_close", rc);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long mib = argc > 1 ? atol(argv[1]) : 32;
  const int trials = argc > 2 ? atoi(argv[2]) : 3;
  g_cold = argc > 3 && strcmp(argv[3], "cold") == 0;
  if (size < 2 || mib <= 0 || trials <= 0 || trials > 100 ||
      (argc > 3 && !g_cold && strcmp(argv[3], "warm") != 0)) {
    if (g_rank == 0) fprintf(stderr, "usage: mpirun -np N>=2 %s [MiB per rank] [trials] [warm|cold]\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  char root[4096], dir[4200], cmd[4400];
  if (mpi_bench_scratch("cairn-xor-rebuild", root, dir) != 0) die("mkdtemp", -1);
  setenv("CAIRN_MPI_RANKS_PER_NODE", "1", 1);
  setenv("CAIRN_L3_EVERY", "1", 1);
  unsetenv("CAIRN_L2_EVERY");
  if (!g_cold) setenv("CAIRN_DIRECT_IO", "0", 1); /* both sides from the page cache (top) */
  char cache[64];
  snprintf(cache, sizeof cache, "%ldMiB", mib + 64);
  setenv("CAIRN_HOST_CACHE", cache, 0);

  const char *code = getenv("CAIRN_L3_CODE");
  const int rs = code != NULL && strcmp(code, "rs") == 0;
  if (rs && size < 3) die("CAIRN_L3_CODE=rs loses two nodes: run on 4 or more ranks", -1);
  g_newest = trials + 1;
  const size_t bytes = (size_t)mib << 20;
  unsigned char *buf = malloc(bytes);
  if (buf == NULL) die("malloc", -1);
  for (size_t i = 0; i < bytes; ++i) buf[i] = (unsigned char)((i * 2654435761u) >> 13) ^ (unsigned char)g_rank;
  cairn_client_t *c = open_client(buf, bytes);
  double l3_wait_s = 0, l3_encode_s = 0, l3_anon_mib = 0;
  timed_encodings(c, trials, &l3_wait_s, &l3_encode_s, &l3_anon_mib);
  int rc = cairn_close(c);
  if (rc != CAIRN_OK) die("cairn_close", rc);

  double read_s[100], rebuild_s[100], restore_s[100], unused = 0, phases[kPhases][100], none[kPhases];
  for (int t = 0; t < trials; ++t) {
    double ph[kPhases];
    same_start(dir);
    timed_restore(buf, bytes, &read_s[t], &unused, none);
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) {
      snprintf(cmd, sizeof cmd, rs ? "rm -rf '%s/node1' '%s/node2'" : "rm -rf '%s/node1'", dir, dir);
      if (system(cmd) != 0) die(cmd, -1);
    }
    same_start(dir);
    timed_restore(buf, bytes, &restore_s[t], &rebuild_s[t], ph);
    for (int k = 0; k < kPhases; ++k) phases[k][t] = ph[k];
  }
  /* Every rank's median phases to rank 0: rank 1's (the lost member) and
   * the slowest survivor's are printed. */
  double mine_ph[kPhases], *all_ph = malloc(sizeof(double) * kPhases * (size_t)size);
  if (all_ph == NULL) die("malloc", -1);
  for (int k = 0; k < kPhases; ++k) mine_ph[k] = median(phases[k], trials);
  MPI_Gather(mine_ph, kPhases, MPI_DOUBLE, all_ph, kPhases, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  /* Rank 1's figures to rank 0. */
  double mine[3] = {median(read_s, trials), median(rebuild_s, trials), median(restore_s, trials)};
  if (g_rank == 1) MPI_Send(mine, 3, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD);
  if (g_rank == 0) {
    MPI_Recv(mine, 3, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("{\"code\": \"%s\", \"lost\": %d, \"ranks\": %d, \"bytes_per_rank\": %zu, \"trials\": %d, \"cache\": \"%s\", \"local_read_s\": %.6f, "
           "\"rebuild_s\": %.6f, \"restore_after_loss_s\": %.6f, \"rebuild_vs_local_read\": %.3f, "
           "\"l3_wait_s\": %.6f, \"l3_encode_s\": %.6f, \"l3_wait_anon_mib\": %.1f",
           rs ? "rs" : "xor", rs ? 2 : 1, size, bytes, trials, g_cold ? "cold" : "warm", mine[0], mine[1], mine[2], mine[1] / mine[0], l3_wait_s,
           l3_encode_s, l3_anon_mib);
    for (int who = 0; who < 2; ++who) {
      printf(", \"%s\": {", who == 0 ? "lost_phases" : "survivor_phases_max");
      for (int k = 0; k < kPhases; ++k) {
        double v = who == 0 ? all_ph[kPhases + k] : 0;
        for (int r = 0; who == 1 && r < size && r < 4; ++r)  /* rank 1's set: ranks 0-3 */
          if (r != 1 && !(rs && r == 2) && all_ph[r * kPhases + k] > v) v = all_ph[r * kPhases + k];
        printf("%s\"%s\": %.4f", k ? ", " : "", kPhaseNames[k], v);
      }
      printf("}");
    }
    printf("}\n");
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
  }
  free(all_ph);
  free(buf);
  MPI_Finalize();
  return 0;
}
