/* What the MPI test programs share (tests/mpi/ programs, docs/mpi.md "Tests"):
 * every rank checks what it sees, failures are counted per rank and summed
 * by main; a fresh job root per run; opening, stderr capture and the
 * configuration-error check. Header-only (static inline): one per program. */
#pragma once
#define _GNU_SOURCE
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cairn/cairn_mpi.h"

#include "mpi_check.h"

enum { kBytes = 300 * 1024 + 123 }; /* several blocks and a partial one */
static char g_root[4096];

/* A fresh job root shared by the ranks; the configuration of every rank. */
static inline void setup(void) {
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
  setenv("CAIRN_KEEP", "4", 0); /* mpi_l2_layered sets 2: chains cross the retention boundary */
  setenv("CAIRN_COPY_THREADS", "0", 1);
  setenv("CAIRN_HOST_CACHE_INIT", "lazy", 1);
  setenv("CAIRN_MPI_RANKS_PER_NODE", "2", 1);
}

static inline void cleanup(void) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0 && g_root[0] != '\0') {
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    if (system(cmd) != 0) fprintf(stderr, "rank 0: could not remove %s\n", g_root);
  }
}

/* Simulated nodes a and b (b < 0: none) lost: their whole local
 * directories deleted by rank 0 between two barriers. */
static inline void lose_nodes(int a, int b) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0) {
    char cmd[4400];
    for (int n = 0; n < 2; ++n) {
      const int node = n == 0 ? a : b;
      if (node < 0) continue;
      snprintf(cmd, sizeof cmd, "rm -rf '%s/scratch/node%d'", g_root, node);
      CHECK(system(cmd) == 0, "%s", cmd);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

static inline int all_equal(int64_t v) {
  int64_t lo = v, hi = v;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi;
}

static inline cairn_client_t *open_client(unsigned char *buf) { return open_client_bytes(buf, kBytes); }

/* Opens with the environment as it is now: must fail on every rank with
 * CAIRN_ERR_CONFIG and a message containing `expect`. */
static inline void expect_config_error(const char *what, const char *expect) {
  cairn_client_t *c = NULL;
  int rc = cairn_open_mpi(MPI_COMM_WORLD, NULL, &c);
  CHECK(rc == CAIRN_ERR_CONFIG && c == NULL, "%s: rc %d, want CAIRN_ERR_CONFIG", what, rc);
  CHECK(strstr(cairn_last_error(), expect) != NULL, "%s: message lacks '%s'", what, expect);
  if (c) cairn_close(c);
}

/* Reads a whole file into a malloc'ed buffer (*n bytes); NULL if absent. */
static inline unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *data = malloc(size > 0 ? (size_t)size : 1);
  *n = fread(data, 1, (size_t)size, f);
  fclose(f);
  return data;
}

/* Runs restore_latest (or restore(v) when v >= 0) with this rank's stderr in
 * a file; returns what Cairn logged in *log (static buffer). */
static inline int restore_logged(cairn_client_t *c, int64_t v, int64_t *got, char *log, size_t cap) {
  char path[4400];
  snprintf(path, sizeof path, "%s/stderr.rank%d", g_root, g_rank);
  fflush(stderr);
  int saved = dup(2);
  FILE *f = fopen(path, "w");
  dup2(fileno(f), 2);
  int rc = v < 0 ? cairn_restore_latest(c, "state", got) : cairn_restore(c, "state", v);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  fclose(f);
  size_t n = 0;
  unsigned char *text = slurp(path, &n);
  n = n < cap - 1 ? n : cap - 1;
  memcpy(log, text ? (char *)text : "", text ? n : 0);
  log[text ? n : 0] = '\0';
  free(text);
  return rc;
}

