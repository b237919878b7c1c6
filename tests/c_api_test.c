/* End-to-end test of the C API (include/cairn/cairn.h), written in C99.
 *
 * Uses a private scratch directory (CAIRN_SCRATCH under a mkdtemp directory)
 * and a 16 MiB host cache. Every failed check prints file:line, the expression,
 * the error code's name and cairn_last_error(); the program then returns 1.
 */
#define _XOPEN_SOURCE 700 /* setenv, unsetenv, mkdtemp, nftw, pread, pwrite */

#include <fcntl.h>
#include <unistd.h>

#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cairn/cairn.h"

static int g_checks = 0;
static int g_failures = 0;

#define CHECK(cond, what)                                                           \
  do {                                                                              \
    ++g_checks;                                                                     \
    if (!(cond)) {                                                                  \
      ++g_failures;                                                                 \
      fprintf(stderr, "%s:%d: FAILED: %s (%s)\n", __FILE__, __LINE__, #cond, what); \
    }                                                                               \
  } while (0)

/* Checks that `expr` returns `want`; on mismatch names both codes. */
#define CHECK_RC(expr, want)                                                                 \
  do {                                                                                       \
    int rc_ = (expr);                                                                        \
    ++g_checks;                                                                              \
    if (rc_ != (want)) {                                                                     \
      ++g_failures;                                                                          \
      fprintf(stderr, "%s:%d: FAILED: %s returned %d (%s), expected %d (%s)\n", __FILE__,    \
              __LINE__, #expr, rc_, cairn_strerror(rc_), (int)(want), cairn_strerror(want)); \
      if (rc_ != 0) fprintf(stderr, "    last error: %s\n", cairn_last_error());             \
    }                                                                                        \
  } while (0)

/* Like CHECK_RC, but later steps depend on it: stop the test on failure. */
#define REQUIRE_RC(expr, want)            \
  do {                                    \
    int before_ = g_failures;             \
    CHECK_RC(expr, want);                 \
    if (g_failures != before_) goto done; \
  } while (0)

enum { kNumA = 100000, kNumB = 3001, kSteps = 10 };

static double g_a[kNumA];
static int32_t g_b[kNumB];

/* Flips one bit of the byte at `offset` of `path`; 0 on success. */
static int flip_bit(const char* path, long offset) {
  unsigned char byte = 0;
  int ok;
  int fd = open(path, O_RDWR);
  if (fd < 0) return -1;
  ok = pread(fd, &byte, 1, (off_t)offset) == 1;
  byte ^= 0x10;
  ok = ok && pwrite(fd, &byte, 1, (off_t)offset) == 1;
  close(fd);
  return ok ? 0 : -1;
}

static void fill(int version) {
  size_t i;
  for (i = 0; i < kNumA; ++i) g_a[i] = (double)version * 1000003.0 + (double)i * 0.5;
  for (i = 0; i < kNumB; ++i) g_b[i] = (int32_t)(version * 7919 + (int)i * 3 - 1);
}

/* 1 if the arrays hold fill(version)'s content. */
static int holds(int version) {
  size_t i;
  for (i = 0; i < kNumA; ++i)
    if (g_a[i] != (double)version * 1000003.0 + (double)i * 0.5) return 0;
  for (i = 0; i < kNumB; ++i)
    if (g_b[i] != (int32_t)(version * 7919 + (int)i * 3 - 1)) return 0;
  return 1;
}

static void scribble(void) {
  memset(g_a, 0xAB, sizeof g_a);
  memset(g_b, 0xCD, sizeof g_b);
}

static size_t step_bytes(int64_t step) { return 1 + (size_t)step * 200003u; }

static unsigned char step_byte(int64_t step, size_t i) {
  return (unsigned char)((size_t)step * 31u + i * 7u + (i >> 9));
}

static int rm_entry(const char* path, const struct stat* sb, int flag, struct FTW* ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

static void test_strerror(void) {
  int codes[13];
  int i, j;
  for (i = 0; i < 13; ++i) codes[i] = -i; /* CAIRN_OK .. CAIRN_ERR_INTERNAL */
  CHECK(codes[12] == CAIRN_ERR_INTERNAL, "error codes are 0..-12");
  for (i = 0; i < 13; ++i) {
    const char* s = cairn_strerror(codes[i]);
    CHECK(s != NULL && s[0] != '\0', "cairn_strerror gives a non-empty string");
    if (s == NULL) continue;
    for (j = 0; j < i; ++j) {
      const char* t = cairn_strerror(codes[j]);
      if (t != NULL && strcmp(s, t) == 0) {
        ++g_failures;
        fprintf(stderr, "FAILED: cairn_strerror(%d) == cairn_strerror(%d) == \"%s\"\n", codes[i],
                codes[j], s);
      }
    }
  }
  CHECK(cairn_strerror(-9999) != NULL, "cairn_strerror of an unknown code is not NULL");
  CHECK(cairn_strerror(42) != NULL, "cairn_strerror of a positive code is not NULL");
}

static void test_null_handles(void) {
  int64_t v = 0;
  size_t n = 0;
  char buf[8];
  cairn_stats_t st;
  cairn_history_t* h = NULL;
  CHECK_RC(cairn_open(NULL, NULL), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK_RC(cairn_close(NULL), CAIRN_OK);
  CHECK_RC(cairn_protect(NULL, 0, buf, sizeof buf), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK_RC(cairn_unprotect(NULL, 0), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK_RC(cairn_checkpoint(NULL, "x", 0), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK_RC(cairn_wait(NULL, "x", 0, CAIRN_LEVEL_LOCAL), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK_RC(cairn_latest(NULL, "x", &v), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK_RC(cairn_restore(NULL, "x", 0), CAIRN_ERR_INVALID_ARGUMENT);
  v = 7;
  CHECK_RC(cairn_restore_latest(NULL, "x", &v), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK(v == -1, "restore_latest on a NULL client sets *version_out to -1");
  CHECK_RC(cairn_history_open(NULL, "h", &h), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK(h == NULL, "history_open on a NULL client leaves *out NULL");
  CHECK_RC(cairn_history_push(NULL, 0, buf, sizeof buf), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK_RC(cairn_history_pop(NULL, 0, buf, sizeof buf, &n), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK_RC(cairn_history_close(NULL), CAIRN_OK);
  CHECK_RC(cairn_register_thread(NULL, 0), CAIRN_ERR_INVALID_ARGUMENT);
  {
    int due = 1;
    CHECK_RC(cairn_checkpoint_due(NULL, "x", &due), CAIRN_ERR_INVALID_ARGUMENT);
    CHECK(due == 0, "checkpoint_due on a NULL client sets *due to 0");
  }
  CHECK_RC(cairn_restore_affinity(NULL, CAIRN_CHECKPOINTING_THREAD), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK_RC(cairn_restore_begin(NULL), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK_RC(cairn_restore_end(NULL), CAIRN_ERR_INVALID_ARGUMENT);
  st.size = sizeof st;
  CHECK_RC(cairn_stats(NULL, &st), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK(cairn_last_error() != NULL, "cairn_last_error is never NULL");
}

static void test_history(cairn_client_t* c) {
  cairn_history_t* h = NULL;
  unsigned char* buf;
  size_t max_bytes = step_bytes(kSteps - 1);
  size_t got = 0;
  int64_t s;
  size_t i;

  buf = (unsigned char*)malloc(max_bytes);
  if (buf == NULL) {
    ++g_failures;
    fprintf(stderr, "FAILED: out of memory\n");
    return;
  }
  REQUIRE_RC(cairn_history_open(c, "adjoint", &h), CAIRN_OK);
  CHECK(h != NULL, "cairn_history_open sets *out");
  if (h == NULL) goto done;
  CHECK_RC(cairn_history_push(h, 0, NULL, 4), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK_RC(cairn_history_push(h, -1, buf, 4), CAIRN_ERR_INVALID_ARGUMENT);

  for (s = 0; s < kSteps; ++s) {
    size_t bytes = step_bytes(s);
    for (i = 0; i < bytes; ++i) buf[i] = step_byte(s, i);
    CHECK_RC(cairn_history_push(h, s, buf, bytes), CAIRN_OK);
  }
  /* The push copied the data: changing buf must not change the steps. */
  memset(buf, 0xEE, max_bytes);

  /* Too small a buffer: CAIRN_ERR_SIZE_MISMATCH and the step stays. */
  CHECK_RC(cairn_history_pop(h, kSteps - 1, buf, step_bytes(kSteps - 1) - 1, &got),
           CAIRN_ERR_SIZE_MISMATCH);
  CHECK(cairn_last_error()[0] != '\0', "cairn_last_error is set after a size mismatch");

  for (s = kSteps - 1; s >= 0; --s) {
    size_t bytes = step_bytes(s);
    size_t bad = 0;
    got = 0;
    memset(buf, 0xEE, max_bytes);
    CHECK_RC(cairn_history_pop(h, s, buf, max_bytes, &got), CAIRN_OK);
    CHECK(got == bytes, "pop reports the pushed size");
    for (i = 0; i < bytes; ++i)
      if (buf[i] != step_byte(s, i)) ++bad;
    if (bad != 0) {
      ++g_failures;
      fprintf(stderr, "FAILED: step %lld: %lu of %lu bytes differ after pop\n", (long long)s,
              (unsigned long)bad, (unsigned long)bytes);
    }
  }
  /* Popped steps are consumed. */
  CHECK_RC(cairn_history_pop(h, 0, buf, max_bytes, NULL), CAIRN_ERR_NOT_FOUND);
  /* bytes_out may be NULL. */
  buf[0] = 42;
  CHECK_RC(cairn_history_push(h, 100, buf, 1), CAIRN_OK);
  buf[0] = 0;
  CHECK_RC(cairn_history_pop(h, 100, buf, max_bytes, NULL), CAIRN_OK);
  CHECK(buf[0] == 42, "pop with bytes_out == NULL copies the data");

done:
  if (h != NULL) CHECK_RC(cairn_history_close(h), CAIRN_OK);
  free(buf);
}

/* cairn_stats_t's layout: the size header, then the rows of cairn_stats.def
 * naturally aligned with no hidden padding (the Fortran binding mirrors it;
 * tests/fortran checks the same size). */
/* cairn_checkpoint_due: CAIRN_ERR_CONFIG without an MTBF; with one, due
 * before the first checkpoint of a name and not right after it (an MTBF of
 * 1e15 s puts the interval at >= 1400 s for any measured cost). */
static void test_checkpoint_due(void) {
  cairn_client_t* c = NULL;
  cairn_stats_t st = CAIRN_STATS_INIT;
  int due = 7;
  REQUIRE_RC(cairn_open(NULL, &c), CAIRN_OK);
  CHECK_RC(cairn_checkpoint_due(c, "due", &due), CAIRN_ERR_CONFIG);
  CHECK(due == 0, "no MTBF: *due is 0");
  CHECK(strstr(cairn_last_error(), "checkpoint.mtbf_s (CAIRN_MTBF) is not set") != NULL,
        "the error names the missing key");
  CHECK_RC(cairn_checkpoint_due(c, NULL, &due), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK_RC(cairn_checkpoint_due(c, "due", NULL), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK_RC(cairn_close(c), CAIRN_OK);
  c = NULL;

  setenv("CAIRN_MTBF", "1e15", 1);
  REQUIRE_RC(cairn_open(NULL, &c), CAIRN_OK);
  unsetenv("CAIRN_MTBF");
  REQUIRE_RC(cairn_protect(c, 0, g_a, sizeof g_a), CAIRN_OK);
  CHECK_RC(cairn_checkpoint_due(c, "due", &due), CAIRN_OK);
  CHECK(due == 1, "due before the first checkpoint");
  CHECK_RC(cairn_checkpoint(c, "due", 1), CAIRN_OK);
  CHECK_RC(cairn_checkpoint_due(c, "due", &due), CAIRN_OK);
  CHECK(due == 0, "not due right after a checkpoint");
  CHECK_RC(cairn_checkpoint_due(c, "due2", &due), CAIRN_OK);
  CHECK(due == 1, "another name is due");
  CHECK_RC(cairn_checkpoint_due(c, "a/b", &due), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK_RC(cairn_checkpoint_due(c, "due", &due), CAIRN_OK);
  CHECK_RC(cairn_stats(c, &st), CAIRN_OK);
  CHECK(st.interval_checkpoint_s > 0, "stats: the measured checkpoint cost");
  CHECK(st.interval_period_s >= 1400, "stats: the interval in use");
  CHECK(st.interval_waste > 0 && st.interval_waste < 1e-3, "stats: the expected waste");
  CHECK(st.interval_restore_s == (double)sizeof g_a / 1e9, "stats: R estimated at 1 GB/s");
  CHECK_RC(cairn_close(c), CAIRN_OK);
  c = NULL;
done:
  unsetenv("CAIRN_MTBF");
  if (c != NULL) cairn_close(c);
}

static void test_stats_layout(void) {
  CHECK(offsetof(cairn_stats_t, size) == 0, "size comes first");
  CHECK(offsetof(cairn_stats_t, capture_bytes) == 8, "the first row follows size");
  CHECK(offsetof(cairn_stats_t, device_capacity_bytes) % 8 == 0, "64-bit fields are 8-aligned");
  CHECK(offsetof(cairn_stats_t, zero_copy_address_epochs) + sizeof(uint64_t) == sizeof(cairn_stats_t),
        "no padding at the end");
  CHECK(sizeof(cairn_stats_t) == 864, "cairn_stats_t is 864 bytes (tests/fortran checks the same)");
  CHECK(CAIRN_DEVICE_CACHE_DIRECT == 0 && CAIRN_DEVICE_CACHE_INCREMENTAL == 1,
        "cairn_device_cache_init_t values match cairn::DeviceCacheInit");
}

/* A caller built against an older, shorter cairn_stats_t: the library fills
 * exactly the prefix it has and writes nothing past it (guard bytes), and says
 * how much it filled. A size too small for the header is refused. */
#define GUARD 0xA5
static void test_stats_sizes(cairn_client_t* c) {
  /* The struct of a caller built before the persistence rows (456 bytes),
   * then today's struct as an older caller would see it if other rows were
   * new. */
  const size_t old_sizes[] = {offsetof(cairn_stats_t, persist_file_copies),
                              offsetof(cairn_stats_t, device_used_bytes),
                              offsetof(cairn_stats_t, device_gpu),
                              offsetof(cairn_stats_t, capture_ops), sizeof(uint64_t)};
  unsigned char buf[sizeof(cairn_stats_t) + 64];
  cairn_stats_t full = CAIRN_STATS_INIT;
  uint64_t size;
  size_t i, k;
  CHECK(full.size == sizeof(cairn_stats_t), "CAIRN_STATS_INIT sets size");
  CHECK_RC(cairn_stats(c, &full), CAIRN_OK);
  CHECK(full.size == sizeof(cairn_stats_t), "a current caller gets every field");
  CHECK(full.cache_capacity_bytes > 0, "a current caller gets the cache capacity");
  for (i = 0; i < sizeof old_sizes / sizeof old_sizes[0]; ++i) {
    const size_t n = old_sizes[i];
    int intact = 1;
    memset(buf, GUARD, sizeof buf);
    size = n;
    memcpy(buf, &size, sizeof size);
    CHECK_RC(cairn_stats(c, (cairn_stats_t*)(void*)buf), CAIRN_OK);
    for (k = n; k < sizeof buf; ++k) intact = intact && buf[k] == GUARD;
    CHECK(intact, "nothing is written past an old caller's size");
    memcpy(&size, buf, sizeof size);
    CHECK(size == n, "size says how many bytes were filled");
    if (n > offsetof(cairn_stats_t, cache_capacity_bytes)) {
      uint64_t cap;
      memcpy(&cap, buf + offsetof(cairn_stats_t, cache_capacity_bytes), sizeof cap);
      CHECK(cap == full.cache_capacity_bytes, "an old caller's fields are filled");
    }
  }
  /* A caller that is larger (built against a newer header): only ours is filled. */
  memset(buf, GUARD, sizeof buf);
  size = sizeof buf;
  memcpy(buf, &size, sizeof size);
  CHECK_RC(cairn_stats(c, (cairn_stats_t*)(void*)buf), CAIRN_OK);
  memcpy(&size, buf, sizeof size);
  CHECK(size == sizeof(cairn_stats_t), "a newer caller learns how much was filled");
  CHECK(buf[sizeof(cairn_stats_t)] == GUARD, "nothing past the library's own struct");
  /* size not set (0) or too small for the size member itself. */
  for (size = 0; size < sizeof(uint64_t); size += 7) {
    memset(buf, GUARD, sizeof buf);
    memcpy(buf, &size, sizeof size);
    CHECK_RC(cairn_stats(c, (cairn_stats_t*)(void*)buf), CAIRN_ERR_INVALID_ARGUMENT);
    CHECK(strstr(cairn_last_error(), "sizeof(cairn_stats_t)") != NULL,
          "the message says to set size");
    CHECK(buf[sizeof size] == GUARD, "nothing is written for a bad size");
  }
}

/* cairn_alloc/cairn_free: page-aligned (2 MiB-aligned when large), zeroed,
 * writable; bad input is an error value with a message, never a crash. */
static void test_alloc(void) {
  void* p = (void*)1;
  void* big = NULL;
  long page = sysconf(_SC_PAGESIZE);
  CHECK_RC(cairn_alloc(0, &p), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK(p == NULL, "a failed cairn_alloc sets *out to NULL");
  CHECK_RC(cairn_alloc(100, NULL), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK_RC(cairn_alloc((size_t)1 << 62, &p), CAIRN_ERR_NO_MEMORY);
  CHECK(strstr(cairn_last_error(), "mmap") != NULL, "the message names the failed mmap");
  CHECK_RC(cairn_alloc(100, &p), CAIRN_OK);
  CHECK(p != NULL && (uintptr_t)p % (uintptr_t)page == 0, "cairn_alloc is page-aligned");
  if (p != NULL) {
    CHECK(((unsigned char*)p)[99] == 0, "cairn_alloc memory is zeroed");
    memset(p, 0xab, (size_t)page); /* the whole page is usable */
  }
  CHECK_RC(cairn_alloc((size_t)5 << 20, &big), CAIRN_OK);
  CHECK(big != NULL && (uintptr_t)big % ((uintptr_t)2 << 20) == 0, "large cairn_alloc is 2 MiB-aligned");
  if (big != NULL) ((unsigned char*)big)[((size_t)5 << 20) - 1] = 1;
  CHECK_RC(cairn_free(big), CAIRN_OK);
  CHECK_RC(cairn_free((char*)p + 8), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK(strstr(cairn_last_error(), "cairn_alloc") != NULL, "the message says what cairn_free accepts");
  CHECK_RC(cairn_free(p), CAIRN_OK);
  CHECK_RC(cairn_free(p), CAIRN_ERR_INVALID_ARGUMENT); /* double free */
  CHECK_RC(cairn_free(NULL), CAIRN_OK);
}

/* cairn_protect_ex: its argument checks, and a region hashed under a client
 * in checkpoint.changes = full: its second version is layered. */
static unsigned char g_big[256 * 1024];

static void test_protect_ex(void) {
  cairn_client_t* c = NULL;
  cairn_protect_options_t o = CAIRN_PROTECT_OPTIONS_INIT;
  cairn_stats_t st = CAIRN_STATS_INIT;
  CHECK_RC(cairn_open(NULL, &c), CAIRN_OK);
  if (c == NULL) return;
  CHECK(o.changes == CAIRN_CHANGES_DEFAULT && o.size == sizeof o, "CAIRN_PROTECT_OPTIONS_INIT");
  o.size = 0;
  CHECK_RC(cairn_protect_ex(c, 1, g_big, sizeof g_big, &o), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK(strstr(cairn_last_error(), "size") != NULL, "the error names opts->size");
  o.size = sizeof o;
  o.changes = 9;
  CHECK_RC(cairn_protect_ex(c, 1, g_big, sizeof g_big, &o), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK_RC(cairn_protect_ex(NULL, 1, g_big, sizeof g_big, &o), CAIRN_ERR_INVALID_ARGUMENT);
  o.changes = CAIRN_CHANGES_HASH;
  CHECK_RC(cairn_protect_ex(c, 1, g_big, sizeof g_big, &o), CAIRN_OK);
  memset(g_big, 1, sizeof g_big);
  CHECK_RC(cairn_checkpoint(c, "layered", 1), CAIRN_OK);
  CHECK_RC(cairn_wait(c, "layered", 1, CAIRN_LEVEL_LOCAL), CAIRN_OK);
  g_big[100000] = 2;
  CHECK_RC(cairn_checkpoint(c, "layered", 2), CAIRN_OK);
  CHECK_RC(cairn_wait(c, "layered", 2, CAIRN_LEVEL_LOCAL), CAIRN_OK);
  CHECK_RC(cairn_stats(c, &st), CAIRN_OK);
  CHECK(st.changes_layered_versions == 1 && st.changes_full_versions == 1, "version 2 is layered");
  CHECK(st.changes_bytes_stored == sizeof g_big + 64 * 1024, "version 2 stores one 64 KiB chunk");
  memset(g_big, 0, sizeof g_big);
  CHECK_RC(cairn_restore(c, "layered", 2), CAIRN_OK);
  CHECK(g_big[100000] == 2 && g_big[0] == 1 && g_big[sizeof g_big - 1] == 1, "version 2 restored");
  CHECK_RC(cairn_protect_ex(c, 1, g_big, sizeof g_big, NULL), CAIRN_OK); /* NULL: no options */
  CHECK_RC(cairn_close(c), CAIRN_OK);
}

int main(void) {
  char root[4096];
  char scratch[4200];
  const char* tmp = getenv("TMPDIR");
  cairn_client_t* c = NULL;
  cairn_stats_t st;
  int64_t latest = -1;
  int v;

  if (tmp == NULL || tmp[0] == '\0') tmp = "/tmp";
  snprintf(root, sizeof root, "%s/cairn_c_api_XXXXXX", tmp);
  if (mkdtemp(root) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  snprintf(scratch, sizeof scratch, "%s/scratch", root);
  setenv("CAIRN_SCRATCH", scratch, 1);
  setenv("CAIRN_HOST_CACHE", "16MiB", 1);
  setenv("CAIRN_HOST_CACHE_INIT", "lazy", 1);
  unsetenv("CAIRN_PERSISTENT");
  unsetenv("CAIRN_KEEP");

  test_strerror();
  test_null_handles();
  test_stats_layout();
  test_alloc();
  test_protect_ex();

  /* Open with defaults (+ environment). */
  REQUIRE_RC(cairn_open(NULL, &c), CAIRN_OK);
  CHECK(c != NULL, "cairn_open sets *out");
  if (c == NULL) goto done;

  REQUIRE_RC(cairn_protect(c, 0, g_a, sizeof g_a), CAIRN_OK);
  REQUIRE_RC(cairn_protect(c, 7, g_b, sizeof g_b), CAIRN_OK);
  CHECK_RC(cairn_unprotect(c, 12345), CAIRN_ERR_NOT_FOUND);
  CHECK_RC(cairn_register_thread(c, 0), CAIRN_OK);
  CHECK_RC(cairn_register_thread(c, -1), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK_RC(cairn_restore_affinity(c, 0), CAIRN_ERR_STATE); /* nothing restored yet */

  for (v = 1; v <= 3; ++v) {
    fill(v);
    CHECK_RC(cairn_checkpoint(c, "sim", v), CAIRN_OK);
  }
  CHECK_RC(cairn_checkpoint(c, "sim", -1), CAIRN_ERR_INVALID_ARGUMENT);
  for (v = 1; v <= 3; ++v) CHECK_RC(cairn_wait(c, "sim", v, CAIRN_LEVEL_LOCAL), CAIRN_OK);
  CHECK_RC(cairn_wait(c, "sim", 3, CAIRN_LEVEL_CACHE), CAIRN_OK);

  CHECK_RC(cairn_latest(c, "sim", &latest), CAIRN_OK);
  CHECK(latest == 3, "latest is the newest checkpointed version");
  CHECK_RC(cairn_latest(c, "no_such_name", &latest), CAIRN_ERR_NOT_FOUND);
  CHECK_RC(cairn_latest(c, "sim", NULL), CAIRN_ERR_INVALID_ARGUMENT);

  scribble();
  CHECK_RC(cairn_restore(c, "sim", 2), CAIRN_OK);
  CHECK(holds(2), "restore(2) brings back version 2's content");
  /* Its placement record has this thread under both indexes. */
  CHECK_RC(cairn_restore_affinity(c, 0), CAIRN_OK);
  CHECK_RC(cairn_restore_affinity(c, CAIRN_CHECKPOINTING_THREAD), CAIRN_OK);
  CHECK_RC(cairn_restore_affinity(c, 5), CAIRN_ERR_NOT_FOUND);
  scribble();
  CHECK_RC(cairn_restore(c, "sim", 3), CAIRN_OK);
  CHECK(holds(3), "restore(3) brings back version 3's content");
  CHECK_RC(cairn_restore(c, "sim", 99), CAIRN_ERR_NOT_FOUND);

  /* A restore made of several calls: counted from begin to end. */
  {
    cairn_stats_t restoring;
    restoring.size = sizeof restoring;
    CHECK_RC(cairn_restore_end(c), CAIRN_ERR_STATE);
    CHECK_RC(cairn_restore_begin(c), CAIRN_OK);
    CHECK_RC(cairn_restore(c, "sim", 3), CAIRN_OK);
    CHECK_RC(cairn_stats(c, &restoring), CAIRN_OK);
    CHECK(restoring.init_restores_now == 1, "a begun restore counts until its end");
    CHECK_RC(cairn_restore_end(c), CAIRN_OK);
    CHECK_RC(cairn_stats(c, &restoring), CAIRN_OK);
    CHECK(restoring.init_restores_now == 0, "an ended restore no longer counts");
  }

  /* A region whose size differs from the checkpoint's. */
  REQUIRE_RC(cairn_protect(c, 7, g_b, sizeof g_b - sizeof g_b[0]), CAIRN_OK);
  CHECK_RC(cairn_restore(c, "sim", 2), CAIRN_ERR_SIZE_MISMATCH);
  CHECK(cairn_last_error()[0] != '\0', "cairn_last_error is set after a size mismatch");
  REQUIRE_RC(cairn_protect(c, 7, g_b, sizeof g_b), CAIRN_OK);

  /* Invalid names. */
  CHECK_RC(cairn_checkpoint(c, "a/b", 4), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK(cairn_last_error() != NULL && cairn_last_error()[0] != '\0',
        "cairn_last_error is non-empty after a failed call");
  CHECK_RC(cairn_checkpoint(c, "..", 4), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK_RC(cairn_checkpoint(c, "", 4), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK_RC(cairn_checkpoint(c, NULL, 4), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK_RC(cairn_restore(c, "a/b", 1), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK_RC(cairn_latest(c, "a/b", &latest), CAIRN_ERR_INVALID_ARGUMENT);

  test_history(c);

  test_stats_sizes(c);
  memset(&st, 0, sizeof st);
  st.size = sizeof st;
  CHECK_RC(cairn_stats(c, &st), CAIRN_OK);
  CHECK(st.capture_bytes >= 3 * (sizeof g_a + sizeof g_b), "stats count captured bytes");
  CHECK(st.flush_local_bytes >= 3 * (sizeof g_a + sizeof g_b), "stats count flushed bytes");
  CHECK(st.restore_bytes >= 2 * (sizeof g_a + sizeof g_b), "stats count restored bytes");
  CHECK(st.cache_capacity_bytes > 0 && st.cache_capacity_bytes <= (16u << 20),
        "cache capacity follows CAIRN_HOST_CACHE=16MiB");
  CHECK(st.cache_used_bytes <= st.cache_capacity_bytes, "cache use within capacity");
  CHECK(st.init_strategy == CAIRN_INIT_LAZY, "init strategy follows CAIRN_HOST_CACHE_INIT=lazy");
  CHECK(st.init_capture_untouched_bytes + st.init_capture_touched_bytes + st.init_capture_pinned_bytes ==
            st.capture_bytes,
        "captured bytes are booked by memory state");
  CHECK(st.init_touched_bytes == 0, "lazy touches nothing in the background");
  CHECK(st.init_pin_failed == 0, "pinning is off by default");
  CHECK(st.failed_flushes == 0, "no failed flushes");
  /* The GPU tier: host regions only and no device cache (CAIRN_DEVICE_CACHE unset). */
  CHECK(st.device_gpu == 0 || st.device_gpu == 1, "device_gpu is a flag");
  CHECK(st.device_init == CAIRN_DEVICE_CACHE_DIRECT || st.device_init == CAIRN_DEVICE_CACHE_INCREMENTAL,
        "device_init is a cairn_device_cache_init_t");
  CHECK(st.device_capacity_bytes == 0 && st.device_mapped_bytes == 0 && st.device_used_bytes == 0,
        "no device cache without device_cache.size");
  CHECK(st.device_fully_mapped_s < 0, "no device cache: never fully mapped");
  CHECK(st.device_capture_bytes == 0 && st.device_drain_bytes == 0 && st.device_prefetch_bytes == 0,
        "host regions move nothing through the GPU tier");
  CHECK(st.device_capture_seconds == 0 && st.device_drain_seconds == 0 &&
            st.device_prefetch_seconds == 0 && st.device_capture_blocked_s == 0,
        "no GPU tier time");
  CHECK(st.device_hits == 0 && st.device_evictions == 0 && st.device_bounce_bytes == 0,
        "no device cache hits, evictions or bounces");
  CHECK(st.device_map_failed == 0, "no mapping failure");
  CHECK_RC(cairn_stats(c, NULL), CAIRN_ERR_INVALID_ARGUMENT);

  CHECK_RC(cairn_close(c), CAIRN_OK);
  c = NULL;

  test_checkpoint_due();

  /* A new client finds the committed versions in the scratch directory. */
  REQUIRE_RC(cairn_open(NULL, &c), CAIRN_OK);
  REQUIRE_RC(cairn_protect(c, 0, g_a, sizeof g_a), CAIRN_OK);
  REQUIRE_RC(cairn_protect(c, 7, g_b, sizeof g_b), CAIRN_OK);
  CHECK_RC(cairn_latest(c, "sim", &latest), CAIRN_OK);
  CHECK(latest == 3, "a new client sees version 3 as latest");
  scribble();
  CHECK_RC(cairn_restore(c, "sim", 3), CAIRN_OK);
  CHECK(holds(3), "a new client restores version 3 from its file");
  CHECK_RC(cairn_close(c), CAIRN_OK);
  c = NULL;

  /* The restart in one call, then with version 3's data damaged (the first
   * data byte, right after the 4096-byte header): version 2 is restored. */
  REQUIRE_RC(cairn_open(NULL, &c), CAIRN_OK);
  REQUIRE_RC(cairn_protect(c, 0, g_a, sizeof g_a), CAIRN_OK);
  REQUIRE_RC(cairn_protect(c, 7, g_b, sizeof g_b), CAIRN_OK);
  scribble();
  latest = -1;
  CHECK_RC(cairn_restore_latest(c, "sim", &latest), CAIRN_OK);
  CHECK(latest == 3, "restore_latest restores version 3");
  CHECK(holds(3), "restore_latest brings back version 3's content");
  CHECK_RC(cairn_restore_latest(c, "no_such_name", &latest), CAIRN_ERR_NOT_FOUND);
  CHECK(latest == -1, "restore_latest sets *version_out to -1 on error");
  CHECK_RC(cairn_restore_latest(c, "sim", NULL), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK_RC(cairn_restore_latest(c, "a/b", &latest), CAIRN_ERR_INVALID_ARGUMENT);
  CHECK_RC(cairn_close(c), CAIRN_OK);
  c = NULL;
  {
    char file[4400];
    snprintf(file, sizeof file, "%s/sim/v00000000000000000003.cairn", scratch);
    CHECK(flip_bit(file, 4096) == 0, "damage version 3's first data block");
  }
  REQUIRE_RC(cairn_open(NULL, &c), CAIRN_OK);
  REQUIRE_RC(cairn_protect(c, 0, g_a, sizeof g_a), CAIRN_OK);
  REQUIRE_RC(cairn_protect(c, 7, g_b, sizeof g_b), CAIRN_OK);
  CHECK_RC(cairn_restore(c, "sim", 3), CAIRN_ERR_CORRUPT);
  CHECK(strstr(cairn_last_error(), "v00000000000000000003.cairn: block 0") != NULL,
        "the error names the damaged file and block");
  scribble();
  CHECK_RC(cairn_restore_latest(c, "sim", &latest), CAIRN_OK);
  CHECK(latest == 2, "restore_latest falls back to version 2 when 3 is damaged");
  CHECK(holds(2), "restore_latest brings back version 2's content");
  CHECK_RC(cairn_close(c), CAIRN_OK);
  c = NULL;

done:
  if (c != NULL) cairn_close(c);
  nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  if (g_failures != 0) {
    fprintf(stderr, "c_api_test: %d of %d checks FAILED\n", g_failures, g_checks);
    return 1;
  }
  printf("c_api_test: all %d checks passed\n", g_checks);
  return 0;
}
