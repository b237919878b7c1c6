/* The peers' checkpoint identity (docs/veloc.md, docs/fti.md, "Checkpoint
 * ids"), observed as their programs observe it:
 *   repeat_ids veloc|fti take <cfg>    checkpoints state 1, 2, 3 as id 1, then
 *                                      state 4 as id 5 and state 5 as id 3;
 *   repeat_ids veloc|fti check <cfg>   a relaunch: what it finds.
 * VELOC: a repeated version replaces the earlier one; Restart_test gives the
 * highest version <= the bound (VELOC's rule): 5, and 3 below 5, 1 below 3
 * with the third state. FTI: the newest checkpoint taken is recovered
 * whatever its id: id 3 with state 5; FTI_Checkpoint returns FTI_DONE.
 * Exit 0 when every check holds. */
#include <fti.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "veloc.h"

static int state;
static int failures;

static void expect(int ok, const char* what, int got) {
  if (ok) return;
  printf("repeat_ids: %s (got %d)\n", what, got);
  ++failures;
}

static void veloc_take(void) {
  static const int ids[] = {1, 1, 1, 5, 3};
  for (int k = 0; k < 5; ++k) {
    state = k + 1;
    int rc = VELOC_Checkpoint("x", ids[k]);
    expect(rc == VELOC_SUCCESS, "VELOC_Checkpoint of a repeated or lower version succeeds", rc);
  }
}

static void veloc_check(void) {
  int v = VELOC_Restart_test("x", 0);
  expect(v == 5, "VELOC_Restart_test(x, 0) is the highest version, 5", v);
  v = VELOC_Restart_test("x", 4);
  expect(v == 3, "VELOC_Restart_test(x, 4) is 3", v);
  v = VELOC_Restart_test("x", 2);
  expect(v == 1, "VELOC_Restart_test(x, 2) is 1", v);
  expect(VELOC_Restart("x", 1) == VELOC_SUCCESS && state == 3, "version 1 restores its newest checkpoint, state 3", state);
  expect(VELOC_Restart("x", 3) == VELOC_SUCCESS && state == 5, "version 3 restores state 5", state);
  expect(VELOC_Restart("x", 5) == VELOC_SUCCESS && state == 4, "version 5 restores state 4", state);
}

static void fti_take(void) {
  static const int ids[] = {1, 1, 1, 5, 3};
  expect(FTI_Status() == 0, "FTI_Status is 0 before any checkpoint", FTI_Status());
  for (int k = 0; k < 5; ++k) {
    state = k + 1;
    int rc = FTI_Checkpoint(ids[k], 1);
    expect(rc == FTI_DONE, "FTI_Checkpoint returns FTI_DONE", rc);
  }
}

static void fti_check(void) {
  expect(FTI_Status() == 1, "FTI_Status is 1 on the relaunch", FTI_Status());
  int rc = FTI_Recover();
  expect(rc == FTI_SCES && state == 5, "FTI_Recover gives the newest checkpoint taken (id 3), state 5", state);
  expect(FTI_Status() == 0, "FTI_Status is 0 after the recovery", FTI_Status());
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: repeat_ids veloc|fti take|check <cfg>\n");
    return 2;
  }
  MPI_Init(&argc, &argv);
  const int veloc = strcmp(argv[1], "veloc") == 0, take = strcmp(argv[2], "take") == 0;
  if (veloc) {
    if (VELOC_Init(MPI_COMM_WORLD, argv[3]) != VELOC_SUCCESS) return 2;
    VELOC_Mem_protect(0, &state, 1, sizeof state);
    take ? veloc_take() : veloc_check();
    expect(VELOC_Finalize(1) == VELOC_SUCCESS, "VELOC_Finalize succeeds", 0);
  } else {
    if (FTI_Init(argv[3], MPI_COMM_WORLD) != FTI_SCES) return 2;
    FTI_Protect(0, &state, 1, FTI_INTG);
    take ? fti_take() : fti_check();
    expect(FTI_Finalize() == FTI_SCES, "FTI_Finalize succeeds", 0);
  }
  MPI_Finalize();
  if (failures == 0) printf("repeat_ids: %s %s OK\n", argv[1], argv[2]);
  return failures == 0 ? 0 : 1;
}
