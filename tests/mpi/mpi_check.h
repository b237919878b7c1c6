/* The checking every tests/mpi/ program shares: each rank checks what it
 * sees; failures are counted per rank (g_failures) and summed by main. */
#pragma once
#include <mpi.h>
#include <stddef.h>
#include <stdio.h>

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

/* Opens a client on MPI_COMM_WORLD and protects `bytes` of `buf` as region 7;
 * a failed open aborts the job (nothing after it could run). */
static inline cairn_client_t *open_client_bytes(unsigned char *buf, size_t bytes) {
  cairn_client_t *c = NULL;
  int rc = cairn_open_mpi(MPI_COMM_WORLD, NULL, &c);
  CHECK(rc == CAIRN_OK, "cairn_open_mpi: %d", rc);
  if (rc != CAIRN_OK) MPI_Abort(MPI_COMM_WORLD, 3);
  rc = cairn_protect(c, 7, buf, bytes);
  CHECK(rc == CAIRN_OK, "cairn_protect: %d", rc);
  return c;
}

/* XORs the byte at `at` of `path` with `mask` (damage that a CRC catches). */
static inline void flip_byte(const char *path, long at, int mask) {
  FILE *f = fopen(path, "r+b");
  int ch = 0;
  CHECK(f && fseek(f, at, SEEK_SET) == 0 && (ch = fgetc(f)) != EOF, "read %s", path);
  if (f) {
    fseek(f, at, SEEK_SET);
    fputc(ch ^ mask, f);
    fclose(f);
  }
}
