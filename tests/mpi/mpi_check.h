/* The checking every tests/mpi/ program shares: each rank checks what it
 * sees; failures are counted per rank (g_failures) and summed by main. */
#pragma once
#include <stdio.h>

#include "cairn/cairn.h"

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
