/* The smallest MPI program with Cairn: every rank checkpoints its buffer,
 * the job waits until every rank has the version, then restores the newest
 * version that every rank has (collective calls; docs/mpi.md). */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "cairn/cairn_mpi.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double field[1024];
  for (int i = 0; i < 1024; ++i) field[i] = rank * 1000.0 + i;

  cairn_client_t *c = NULL;
  int rc = cairn_open_mpi(MPI_COMM_WORLD, NULL, &c);
  if (rc == CAIRN_OK) rc = cairn_protect(c, 0, field, sizeof field);
  if (rc == CAIRN_OK) rc = cairn_checkpoint(c, "field", 1);
  if (rc == CAIRN_OK) rc = cairn_wait(c, "field", 1, CAIRN_LEVEL_LOCAL);
  int64_t version = -1;
  if (rc == CAIRN_OK) {
    memset(field, 0, sizeof field);
    rc = cairn_restore_latest(c, "field", &version);
  }
  if (rc == CAIRN_OK && (version != 1 || field[5] != rank * 1000.0 + 5)) rc = -100;
  if (rc != CAIRN_OK) fprintf(stderr, "rank %d: %d %s\n", rank, rc, cairn_last_error());
  int close_rc = cairn_close(c);
  if (rc == CAIRN_OK) rc = close_rc;
  if (rank == 0 && rc == CAIRN_OK) printf("cairn_consumer_mpi: OK\n");
  MPI_Finalize();
  return rc == CAIRN_OK ? 0 : 1;
}
