/* SIGKILL trials of libcairn_mpi (docs/mpi.md "Tests"), driven by
 * tests/mpi/kill_trials.sh, which runs each trial as two jobs on one root:
 *
 *   kill_test run <root> <seed>    the ranks checkpoint versions 1..kVersions
 *                                  of deterministic content and wait for
 *                                  them collectively; one rank, chosen by the
 *                                  seed, SIGKILLs itself at a point chosen by
 *                                  the seed; mpirun then aborts the job
 *   kill_test check <root> <seed>  the relaunched job: collective latest and
 *                                  restore_latest must give the same version
 *                                  on every rank, byte-exact, and no version
 *                                  that the killed job knew to be globally
 *                                  committed may be lost; then the job goes
 *                                  on (one more checkpoint and wait)
 *
 * "Known globally committed" is the larger of (a) the versions whose
 * collective wait returned OK on some rank of the killed job, which that
 * rank recorded in <root>/committed.r<rank> (temp + fsync + rename) right
 * after the wait, and (b) the `committed` line of every rank's manifest
 * (docs/format.md 3.6) as the relaunched job finds it before opening.
 *
 * Where the kill lands (no sleeps, no timing): the seed picks one of
 *   step: the victim's main thread kills itself at its s-th step of the
 *         loop (before / after a checkpoint, after a wait), so between
 *         Cairn calls, often while the previous checkpoint is still being
 *         flushed by Cairn's own threads;
 *   file: a thread of the victim watches its checkpoint directory with
 *         inotify and kills the process at the k-th file event (a temp file
 *         created, a block written, a rename that commits a version or the
 *         manifest, a retention delete): inside the flush and commit of a
 *         version or the manifest write. With L2 on it also watches the
 *         copies it holds for its source, and with L3 on its parity
 *         directory, so the kill lands inside a partner copy being stored
 *         or a parity being encoded too (a rank that dies mid-encoding must
 *         leave its set's previous parity intact). The process keeps
 *         running while the watcher reads the event, so the exact byte is
 *         random, not chosen.
 * The trial's choices are printed first (rank 0), so a failing seed replays
 * the same choices; which byte a file kill lands on can differ in a replay.
 *
 * CAIRN_KILL_THREAD_MULTIPLE=1 initialises MPI with MPI_THREAD_MULTIPLE: the
 * partner copies and the L3 parity then move on Cairn's own threads, so the
 * kills land inside them as well.
 *
 * CAIRN_KILL_LOSE_NODE=1 (with CAIRN_L2_EVERY or CAIRN_L3_EVERY on, 4 ranks
 * or more: 2 simulated nodes or more) also loses the victim's simulated node
 * before the relaunch: the check job first deletes its local directory
 * (<root>/scratch/node<victim / 2>, every file of its ranks, manifests
 * included). The ranks of that node must then restore a version rebuilt
 * from the partner copies (L2) or the parity (L3, XOR or Reed-Solomon), which the stats must
 * say, and no version whose collective wait returned (redundancy done) may
 * be lost. The manifests' `committed` line does not count there: a version
 * is recorded globally committed before its redundancy is added, so a kill
 * in between leaves a committed version that a lost node cannot rebuild.
 *
 * CAIRN_KILL_LOSE_NODE=2 (Reed-Solomon sets that survive two lost members,
 * 8 ranks or more) loses the victim's node and the next one: every set then
 * lost two members, which the parity must rebuild.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cairn/cairn_mpi.h"

#include "manifest_read.h"
#include "mpi_check.h"

enum { kBytes = 200 * 1024 + 77 }; /* several 64 KiB blocks and a partial one */
enum { kVersions = 8 };            /* checkpointed by the killed job */
enum { kKeep = 4 };                /* > the versions a rank can run ahead of a wait */
static const char *const kName = "state";
static char g_root[3000];

/* The content of version v on this rank: differs per rank and version. */
static unsigned char byte_of(size_t i, int64_t v) {
  return (unsigned char)(i * 131 + (size_t)v * 17 + (size_t)g_rank * 29 + (i >> 9));
}
static void fill(unsigned char *buf, int64_t v) {
  for (size_t i = 0; i < kBytes; ++i) buf[i] = byte_of(i, v);
}
static int holds(const unsigned char *buf, int64_t v) {
  for (size_t i = 0; i < kBytes; ++i) {
    if (buf[i] != byte_of(i, v)) return 0;
  }
  return 1;
}

/* splitmix64: every rank draws the same choices from the seed. */
static uint64_t g_rng;
static uint64_t next_random(void) {
  uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static int below(int n) { return (int)(next_random() % (uint64_t)n); }

/* What the seed chooses for one trial. */
struct Plan {
  int victim;      /* the rank that kills itself */
  int file_kill;   /* 1: at the k-th file event; 0: at the s-th step */
  int at;          /* k or s */
  int wait_every;  /* a collective wait after every 1st or 2nd checkpoint */
};

/* Steps of the loop per version: before the checkpoint, after it, after the
 * wait (when there is one). */
enum { kStepsPerVersion = 3 };
/* File events per version in the victim's directory: a temp file's create,
 * a few block writes, close, rename, the manifest's own, retention deletes;
 * the bound lets some trials run past the end (no kill: the check must
 * still pass). */
enum { kEventsPerVersion = 14 };

static int env_on(const char *name) {
  const char *v = getenv(name);
  return v != NULL && strcmp(v, "") != 0 && strcmp(v, "0") != 0;
}

/* The victim's watched directories (start_watcher): its checkpoints, its
 * copies of its source's (L2 on), its parity (L3 on). */
static int watched_dirs(void) { return 1 + env_on("CAIRN_L2_EVERY") + env_on("CAIRN_L3_EVERY"); }

static struct Plan make_plan(uint64_t seed) {
  g_rng = seed;
  struct Plan p;
  p.victim = below(g_size);
  p.file_kill = below(3) != 0; /* two thirds of the trials kill inside file work */
  p.wait_every = 1 + below(2);
  p.at = p.file_kill ? 1 + below(kVersions * kEventsPerVersion * watched_dirs())
                     : below(kVersions * kStepsPerVersion);
  return p;
}

/* The rank's own directory (simulated nodes of 2 ranks: docs/mpi.md). */
static void rank_root(char *out, size_t n, int rank) {
  snprintf(out, n, "%s/scratch/node%d/rank%d", g_root, rank / 2, rank);
}
static void rank_dir(char *out, size_t n, int rank) {
  char root[3100];
  rank_root(root, sizeof root, rank);
  snprintf(out, n, "%s/%s", root, kName);
}

static void setup_env(void) {
  char dir[3100];
  snprintf(dir, sizeof dir, "%s/scratch", g_root);
  setenv("CAIRN_SCRATCH", dir, 1);
  setenv("CAIRN_HOST_CACHE", "2MiB", 1);
  setenv("CAIRN_BLOCK_SIZE", "64KiB", 1);
  char keep[16];
  snprintf(keep, sizeof keep, "%d", kKeep);
  setenv("CAIRN_KEEP", keep, 1);
  setenv("CAIRN_COPY_THREADS", "0", 1);
  setenv("CAIRN_HOST_CACHE_INIT", "lazy", 1);
  setenv("CAIRN_MPI_RANKS_PER_NODE", "2", 1);
}

static void die_now(const char *where, int at) {
  fprintf(stderr, "rank %d: SIGKILL at %s %d\n", g_rank, where, at);
  kill(getpid(), SIGKILL);
}

/* The victim's inotify watcher: kills the process at the k-th event. */
static int g_watch_fd = -1;
static int g_kill_at;
static void *watch_files(void *arg) {
  (void)arg;
  char events[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
  int seen = 0;
  for (;;) {
    ssize_t n = read(g_watch_fd, events, sizeof events);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return NULL;
    for (char *p = events; p < events + n;) {
      const struct inotify_event *e = (const struct inotify_event *)p;
      if (++seen == g_kill_at) die_now("file event", seen);
      p += sizeof *e + e->len;
    }
  }
}

/* Creates dir (and its parents) and watches it. */
static void watch_dir(const char *dir) {
  char cmd[3400];
  snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
  CHECK(system(cmd) == 0, "%s", cmd);
  int wd = inotify_add_watch(g_watch_fd, dir, IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE);
  CHECK(wd >= 0, "inotify_add_watch %s: %s", dir, strerror(errno));
}

static void start_watcher(int at) {
  char root[3100], dir[3300];
  rank_root(root, sizeof root, g_rank);
  g_watch_fd = inotify_init1(IN_CLOEXEC);
  CHECK(g_watch_fd >= 0, "inotify_init1: %s", strerror(errno));
  if (g_watch_fd < 0) return;
  rank_dir(dir, sizeof dir, g_rank);
  watch_dir(dir);
  if (env_on("CAIRN_L2_EVERY")) { /* the copies of its source, rank - 2 (docs/format.md 3.8) */
    snprintf(dir, sizeof dir, "%s/.partner/rank%d/%s", root, (g_rank - 2 + g_size) % g_size, kName);
    watch_dir(dir);
  }
  if (env_on("CAIRN_L3_EVERY")) {
    const char *code = getenv("CAIRN_L3_CODE");
    snprintf(dir, sizeof dir, "%s/%s/%s", root, code != NULL && strcmp(code, "rs") == 0 ? ".rs" : ".xor", kName);
    watch_dir(dir);
  }
  g_kill_at = at;
  pthread_t t;
  CHECK(pthread_create(&t, NULL, watch_files, NULL) == 0, "pthread_create");
  pthread_detach(t); /* ends with the process: killed, or at exit */
}

/* Atomically replaces <root>/committed.r<rank> with v, durably. */
static void record_committed(int64_t v) {
  char path[3200], tmp[3300];
  snprintf(path, sizeof path, "%s/committed.r%d", g_root, g_rank);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  CHECK(fd >= 0, "open %s: %s", tmp, strerror(errno));
  if (fd < 0) return;
  char text[32];
  int len = snprintf(text, sizeof text, "%lld\n", (long long)v);
  CHECK(write(fd, text, (size_t)len) == len, "write %s", tmp);
  CHECK(fsync(fd) == 0, "fsync %s", tmp);
  close(fd);
  CHECK(rename(tmp, path) == 0, "rename %s", tmp);
}

static int64_t read_number_after(const char *path, const char *key) {
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  char line[256];
  long long v = -1;
  size_t klen = strlen(key);
  while (fgets(line, sizeof line, f) != NULL) {
    if (key[0] == '\0' || (strncmp(line, key, klen) == 0 && line[klen] == ' ')) {
      v = atoll(line + klen);
      break;
    }
  }
  fclose(f);
  return v;
}

static cairn_client_t *open_client(unsigned char *buf) { return open_client_bytes(buf, kBytes); }

static void run(struct Plan p) {
  unsigned char *buf = malloc(kBytes);
  cairn_client_t *c = open_client(buf);
  const int victim = g_rank == p.victim;
  if (victim && p.file_kill) start_watcher(p.at);
  int step = 0;
#define STEP()                                                         \
  do {                                                                 \
    if (victim && !p.file_kill && step == p.at) die_now("step", step); \
    ++step;                                                            \
  } while (0)
  for (int64_t v = 1; v <= kVersions; ++v) {
    STEP();
    fill(buf, v);
    int rc = cairn_checkpoint(c, kName, v);
    CHECK(rc == CAIRN_OK, "checkpoint %lld: %d", (long long)v, rc);
    STEP();
    if (v % p.wait_every == 0) {
      rc = cairn_wait(c, kName, v, CAIRN_LEVEL_LOCAL);
      CHECK(rc == CAIRN_OK, "collective wait %lld: %d", (long long)v, rc);
      if (rc == CAIRN_OK) record_committed(v);
      STEP();
    }
  }
#undef STEP
  int rc = cairn_close(c);
  CHECK(rc == CAIRN_OK, "close: %d", rc);
  free(buf);
}

/* The simulated nodes whose local directories the relaunch loses:
 * CAIRN_KILL_LOSE_NODE=1 the victim's, =2 the victim's and the next one
 * (nodes of 2 ranks); their number (0: none). */
static int lost_nodes(struct Plan p, int lost[2]) {
  const char *v = getenv("CAIRN_KILL_LOSE_NODE");
  const int count = v == NULL ? 0 : atoi(v);
  const int nodes = g_size / 2;
  if (count < 0 || count > 2 || count >= nodes) {
    CHECK(0, "CAIRN_KILL_LOSE_NODE=%s with %d nodes: 1 or 2, fewer than the nodes", v, nodes);
    return 0;
  }
  for (int i = 0; i < count; ++i) lost[i] = (p.victim / 2 + i) % nodes;
  return count;
}

static int on_lost_node(int rank, const int lost[2], int count) {
  for (int i = 0; i < count; ++i) {
    if (rank / 2 == lost[i]) return 1;
  }
  return 0;
}

static void lose_node(int node) {
  if (g_rank == 0) {
    char cmd[3300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/scratch/node%d'", g_root, node);
    CHECK(system(cmd) == 0, "%s", cmd);
    printf("kill_test: node %d (ranks %d, %d) lost its local directory before the relaunch\n", node, 2 * node,
           2 * node + 1);
    fflush(stdout);
  }
}

/* After a restore of version `got` with the `lost` nodes gone: their ranks
 * were served by a redundancy level, the others by their own files. */
static void check_served(cairn_client_t *c, const int lost[2], int count, int64_t got) {
  cairn_stats_t st = CAIRN_STATS_INIT;
  CHECK(cairn_stats(c, &st) == CAIRN_OK, "stats");
  const uint64_t rebuilt = st.mpi_restored_l2 + st.mpi_restored_l3;
  if (on_lost_node(g_rank, lost, count)) {
    CHECK(rebuilt == 1 && st.mpi_restored_local == 0,
          "rank %d of the lost node restored version %lld from L1 %llu times, L2 %llu, L3 %llu: want L2 or L3 once",
          g_rank, (long long)got, (unsigned long long)st.mpi_restored_local,
          (unsigned long long)st.mpi_restored_l2, (unsigned long long)st.mpi_restored_l3);
  } else {
    CHECK(st.mpi_restored_local == 1 && rebuilt == 0,
          "rank %d (node kept) restored version %lld from L1 %llu times, L2 %llu, L3 %llu: want L1 once", g_rank,
          (long long)got, (unsigned long long)st.mpi_restored_local, (unsigned long long)st.mpi_restored_l2,
          (unsigned long long)st.mpi_restored_l3);
  }
}

static void check(struct Plan p) {
  /* What the killed job knew to be globally committed. */
  char path[3300];
  snprintf(path, sizeof path, "%s/committed.r%d", g_root, g_rank);
  int64_t recorded = read_number_after(path, "");
  char dir[3200];
  rank_dir(dir, sizeof dir, g_rank);
  snprintf(path, sizeof path, "%s/global", dir);
  test_manifest_t m;
  int64_t manifest = test_manifest_read(path, &m) == 0 ? m.committed : -1;
  int lost[2];
  const int lost_count = lost_nodes(p, lost);
  int64_t floor = recorded > manifest ? recorded : manifest;
  if (lost_count > 0) floor = recorded; /* see the top: the manifest's line does not survive a node */
  MPI_Allreduce(MPI_IN_PLACE, &floor, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  for (int i = 0; i < lost_count; ++i) lose_node(lost[i]);
  MPI_Barrier(MPI_COMM_WORLD);

  unsigned char *buf = calloc(1, kBytes);
  cairn_client_t *c = open_client(buf);
  int64_t latest = -1, got = -1;
  int rc = cairn_latest(c, kName, &latest);
  CHECK(rc == CAIRN_OK || (rc == CAIRN_ERR_NOT_FOUND && floor < 1), "collective latest: %d", rc);
  rc = cairn_restore_latest(c, kName, &got);
  if (floor >= 1 || rc == CAIRN_OK) {
    CHECK(rc == CAIRN_OK, "collective restore_latest: %d (known committed: %lld)", rc, (long long)floor);
    CHECK(got >= floor, "restore_latest gave version %lld, but version %lld was globally committed", (long long)got,
          (long long)floor);
    CHECK(got == latest, "restore_latest gave %lld, latest said %lld (SIGKILL damages no file)", (long long)got,
          (long long)latest);
    CHECK(got >= 1 && got <= kVersions, "restored version %lld was never checkpointed", (long long)got);
    CHECK(holds(buf, got), "restored data is not version %lld of rank %d", (long long)got, g_rank);
    if (rc == CAIRN_OK && lost_count > 0) check_served(c, lost, lost_count, got);
  } else {
    CHECK(rc == CAIRN_ERR_NOT_FOUND, "restore_latest with nothing committed: %d, want NOT_FOUND", rc);
  }
  int64_t lo = got, hi = got;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  CHECK(lo == hi, "ranks restored different versions (%lld .. %lld)", (long long)lo, (long long)hi);
  if (g_rank == 0)
    printf("kill_test: known globally committed %lld, restored %lld on every rank\n", (long long)floor,
           (long long)hi);

  /* The job goes on over what the killed one left (temp files, versions of
   * some ranks only): the next version commits on every rank. */
  int64_t next = kVersions + 1;
  fill(buf, next);
  rc = cairn_checkpoint(c, kName, next);
  CHECK(rc == CAIRN_OK, "checkpoint %lld after the restart: %d", (long long)next, rc);
  rc = cairn_wait(c, kName, next, CAIRN_LEVEL_LOCAL);
  CHECK(rc == CAIRN_OK, "collective wait %lld after the restart: %d", (long long)next, rc);
  rc = cairn_close(c);
  CHECK(rc == CAIRN_OK, "close: %d", rc);
  free(buf);
}

int main(int argc, char **argv) {
  /* CAIRN_KILL_THREAD_MULTIPLE=1: MPI_THREAD_MULTIPLE, so that Cairn's own
   * threads move the redundancy (docs/mpi.md, "Progress") and the kills land
   * in their transfers and encodings too. */
  const char *mt = getenv("CAIRN_KILL_THREAD_MULTIPLE");
  int provided = 0;
  MPI_Init_thread(&argc, &argv, mt && strcmp(mt, "1") == 0 ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (argc != 4 || (strcmp(argv[1], "run") != 0 && strcmp(argv[1], "check") != 0) ||
      strlen(argv[2]) >= sizeof g_root) {
    if (g_rank == 0) fprintf(stderr, "usage: kill_test run|check <root> <seed>\n");
    MPI_Finalize();
    return 2;
  }
  snprintf(g_root, sizeof g_root, "%s", argv[2]);
  uint64_t seed = strtoull(argv[3], NULL, 10);
  setup_env();
  struct Plan p = make_plan(seed);
  if (strcmp(argv[1], "run") == 0) {
    if (g_rank == 0)
      printf("kill_test: seed %llu, %d ranks: rank %d SIGKILLs itself at %s %d; a wait every %d checkpoint(s)\n",
             (unsigned long long)seed, g_size, p.victim, p.file_kill ? "file event" : "step", p.at, p.wait_every);
    fflush(stdout);
    run(p);
  } else {
    check(p);
  }
  int failures = g_failures;
  MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
