/* The MPI tests' own reader of a rank's global manifest (docs/format.md 3.6,
 * normative; either version), written from the format's text rather than
 * with Cairn's code, so that the tests also check the file against the
 * document. Header-only, C and C++. */
#pragma once
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  int64_t ranks, committed, persistent, ranks_per_node;
} test_manifest_t;

static inline uint32_t test_manifest_crc32c(const unsigned char *p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return c ^ 0xFFFFFFFFu;
}

static inline uint64_t test_manifest_le(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* 0 and *out filled on success; -1 when the file is absent, unreadable or
 * has no valid record. */
static inline int test_manifest_read(const char *path, test_manifest_t *out) {
  unsigned char b[8192];
  FILE *f = fopen(path, "rb");
  if (f == NULL) return -1;
  size_t n = fread(b, 1, sizeof b, f);
  fclose(f);
  const char *v1 = "cairn-global 1\n";
  if (n >= strlen(v1) && memcmp(b, v1, strlen(v1)) == 0) { /* version 1 text */
    long long r = 0, c = 0, p = 0, k = 0;
    char text[8193];
    memcpy(text, b, n);
    text[n] = '\0';
    int got = sscanf(text, "cairn-global 1\nranks %lld\ncommitted %lld\npersistent %lld\nranks_per_node %lld", &r,
                     &c, &p, &k);
    if (got < 3) return -1;
    out->ranks = r, out->committed = c, out->persistent = p, out->ranks_per_node = got == 4 ? k : 0;
    return 0;
  }
  if (n != sizeof b) return -1;
  uint64_t best = 0;
  for (int i = 0; i < 2; ++i) { /* version 2: the valid slot of the larger sequence */
    const unsigned char *s = b + 4096 * i;
    if (memcmp(s, "CAIRNGLB", 8) != 0 || test_manifest_le(s + 8, 4) != 2 || test_manifest_le(s + 12, 4) != (uint64_t)i ||
        test_manifest_le(s + 60, 4) != test_manifest_crc32c(s, 60)) {
      continue;
    }
    const uint64_t seq = test_manifest_le(s + 16, 8);
    if (seq <= best) continue;
    best = seq;
    out->ranks = (int64_t)test_manifest_le(s + 24, 8);
    out->committed = (int64_t)test_manifest_le(s + 32, 8);
    out->persistent = (int64_t)test_manifest_le(s + 40, 8);
    out->ranks_per_node = (int64_t)test_manifest_le(s + 48, 8);
  }
  return best > 0 ? 0 : -1;
}

/* The manifest as "ranks R committed C persistent P ranks_per_node K" (for
 * messages and comparisons), or "(unreadable)". */
static inline void test_manifest_text(const char *path, char *text, size_t cap) {
  test_manifest_t m;
  if (test_manifest_read(path, &m) != 0) {
    snprintf(text, cap, "(unreadable)");
    return;
  }
  snprintf(text, cap, "ranks %lld committed %lld persistent %lld ranks_per_node %lld", (long long)m.ranks,
           (long long)m.committed, (long long)m.persistent, (long long)m.ranks_per_node);
}
