/* Minimal Cairn C API client: checkpoint an array, restore it, verify it.
 *
 * Uses a private temporary scratch directory (CAIRN_SCRATCH) so that it can
 * run anywhere. Exit status 0 on success. */
#define _XOPEN_SOURCE 700 /* setenv, mkdtemp, nftw */

#include <cairn/cairn.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 250000

static double field[N];

static int fail(const char* what, int rc) {
  fprintf(stderr, "consumer: %s failed: %s (%s)\n", what, cairn_strerror(rc), cairn_last_error());
  return 1;
}

static int rm_entry(const char* path, const struct stat* sb, int flag, struct FTW* ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static int run(void) {
  cairn_client_t* c = NULL;
  int64_t latest = -1;
  int rc, i;

  if ((rc = cairn_open(NULL, &c)) != 0) return fail("cairn_open", rc);
  if ((rc = cairn_protect(c, 0, field, sizeof field)) != 0) return fail("cairn_protect", rc);

  for (i = 0; i < N; ++i) field[i] = 0.25 * i;
  if ((rc = cairn_checkpoint(c, "consumer", 1)) != 0) return fail("cairn_checkpoint", rc);
  if ((rc = cairn_wait(c, "consumer", 1, CAIRN_LEVEL_LOCAL)) != 0) return fail("cairn_wait", rc);
  if ((rc = cairn_latest(c, "consumer", &latest)) != 0) return fail("cairn_latest", rc);
  if (latest != 1) {
    fprintf(stderr, "consumer: latest is %lld, expected 1\n", (long long)latest);
    return 1;
  }

  memset(field, 0, sizeof field); /* "lose" the state */
  if ((rc = cairn_restore(c, "consumer", latest)) != 0) return fail("cairn_restore", rc);
  for (i = 0; i < N; ++i) {
    if (field[i] != 0.25 * i) {
      fprintf(stderr, "consumer: field[%d] = %g after restore, expected %g\n", i, field[i],
              0.25 * i);
      return 1;
    }
  }
  if ((rc = cairn_close(c)) != 0) return fail("cairn_close", rc);
  printf("consumer: checkpoint/restore of %lu bytes OK\n", (unsigned long)sizeof field);
  return 0;
}

int main(void) {
  char dir[4096];
  const char* tmp = getenv("TMPDIR");
  int status;

  snprintf(dir, sizeof dir, "%s/cairn_consumer_XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  setenv("CAIRN_SCRATCH", dir, 1);
  setenv("CAIRN_HOST_CACHE", "16MiB", 1);
  status = run();
  nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  return status;
}
