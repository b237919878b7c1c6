#include "common/pattern.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace cairn::bench {
namespace {

inline uint64_t Mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Base pattern: byte o is byte (o % 8) of BaseWord(o / 8), little-endian.
inline uint64_t BaseWord(uint64_t index) { return Mix(index ^ 0x6361697221ull); }

inline uint64_t StampWord(uint64_t tag, uint64_t page) {
  return Mix(Mix(tag) ^ (page * 0xd6e8feb86659fd93ull));
}

// Offsets of a page's stamp words inside [0, n). Slots sit at fixed places
// whatever n is: the first word of the page (when the page has 8 bytes in
// [0, n)) and its last word (only when the whole page is in [0, n)). Fixed
// places matter: a stamp left by a step of another size is always either
// overwritten by this step's stamp or re-based (see Stamp).
struct StampSlots {
  bool has_first = false, has_last = false;
  size_t first = 0, last = 0;
};
inline StampSlots SlotsOf(size_t page, size_t n) {
  StampSlots s;
  const size_t off = page * kPage;
  const size_t end = std::min(off + kPage, n);
  if (end >= off + 8) {
    s.has_first = true;
    s.first = off;
  }
  if (end == off + kPage) {
    s.has_last = true;
    s.last = off + kPage - 8;
  }
  return s;
}

inline uint64_t Load(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline void Store(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }

// Writes the base pattern of [off, off+len) to out[0, len). off % 8 == 0.
void BaseRange(uint8_t* out, size_t off, size_t len) {
  size_t i = 0;
  for (; i + 8 <= len; i += 8) Store(out + i, BaseWord((off + i) / 8));
  if (i < len) {
    uint8_t w[8];
    Store(w, BaseWord((off + i) / 8));
    std::memcpy(out + i, w, len - i);
  }
}
void FillRange(uint8_t* buf, size_t off, size_t len) { BaseRange(buf + off, off, len); }

// The expected content of [off, off+len) for `tag` (len <= kPage, off a page start).
void Expected(uint8_t* out, size_t off, size_t len, size_t n, uint64_t tag) {
  BaseRange(out, off, len);
  const StampSlots s = SlotsOf(off / kPage, n);
  if (s.has_first) Store(out + (s.first - off), StampWord(tag, off / kPage));
  if (s.has_last) Store(out + (s.last - off), ~StampWord(tag, off / kPage));
}

size_t PageCount(size_t n) { return (n + kPage - 1) / kPage; }

}  // namespace

void VerifyStats::Fail(std::string what) {
  ++mismatches;
  if (errors.size() < 8) errors.push_back(std::move(what));
}

void FillBase(uint8_t* buf, size_t n) { FillRange(buf, 0, n); }

void Stamp(uint8_t* buf, size_t n, uint64_t tag) {
  // A partial last page has no last-word slot, but may hold the last-word
  // stamp of a larger earlier step: restore its base first.
  if (n % kPage != 0) FillRange(buf, n / kPage * kPage, n % kPage);
  const size_t pages = PageCount(n);
  for (size_t p = 0; p < pages; ++p) {
    const StampSlots s = SlotsOf(p, n);
    if (s.has_first) Store(buf + s.first, StampWord(tag, p));
    if (s.has_last) Store(buf + s.last, ~StampWord(tag, p));
  }
}

namespace {

// The checks of Verify with the tag of page p given by tag_of(p); `phase`
// chooses the sample of pages compared in full.
template <typename TagOf>
bool VerifyWith(const uint8_t* buf, size_t n, TagOf tag_of, uint64_t phase_tag, bool full,
                const std::string& what, VerifyStats& stats) {
  ++stats.checks;
  const size_t pages = PageCount(n);
  char msg[160];
  for (size_t p = 0; p < pages; ++p) {
    const StampSlots s = SlotsOf(p, n);
    const uint64_t w = StampWord(tag_of(p), p);
    stats.stamp_words += static_cast<uint64_t>(s.has_first) + static_cast<uint64_t>(s.has_last);
    if ((s.has_first && Load(buf + s.first) != w) || (s.has_last && Load(buf + s.last) != ~w)) {
      std::snprintf(msg, sizeof msg, ": stamp of page %zu (offset %zu) is wrong", p, p * kPage);
      stats.Fail(what + msg);
      return false;
    }
  }
  uint8_t expected[kPage];
  const size_t phase = static_cast<size_t>(phase_tag % 64);
  for (size_t p = 0; p < pages; ++p) {
    if (!full && p != 0 && p + 1 != pages && p % 64 != phase) continue;
    const size_t off = p * kPage;
    const size_t len = std::min(kPage, n - off);
    Expected(expected, off, len, n, tag_of(p));
    stats.bytes_compared += len;
    if (std::memcmp(buf + off, expected, len) != 0) {
      size_t bad = 0;
      while (bad < len && buf[off + bad] == expected[bad]) ++bad;
      std::snprintf(msg, sizeof msg, ": byte %zu differs (page %zu)", off + bad, p);
      stats.Fail(what + msg);
      return false;
    }
  }
  return true;
}

}  // namespace

void StampPages(uint8_t* buf, size_t n, uint64_t tag, const std::vector<uint32_t>& pages) {
  const size_t count = PageCount(n);
  for (uint32_t p : pages) {
    if (p >= count) continue;
    const StampSlots s = SlotsOf(p, n);
    if (!s.has_last) FillRange(buf, size_t{p} * kPage, n - size_t{p} * kPage);  // as Stamp does
    if (s.has_first) Store(buf + s.first, StampWord(tag, p));
    if (s.has_last) Store(buf + s.last, ~StampWord(tag, p));
  }
}

bool Verify(const uint8_t* buf, size_t n, uint64_t tag, bool full, const std::string& what,
            VerifyStats& stats) {
  return VerifyWith(buf, n, [tag](size_t) { return tag; }, tag, full, what, stats);
}

bool VerifyPages(const uint8_t* buf, size_t n, const std::vector<uint64_t>& page_tags,
                 uint64_t phase_tag, bool full, const std::string& what, VerifyStats& stats) {
  if (page_tags.size() != PageCount(n)) {
    stats.Fail(what + ": " + std::to_string(page_tags.size()) + " page tags for " +
               std::to_string(PageCount(n)) + " pages");
    return false;
  }
  return VerifyWith(buf, n, [&](size_t p) { return page_tags[p]; }, phase_tag, full, what, stats);
}

}  // namespace cairn::bench
