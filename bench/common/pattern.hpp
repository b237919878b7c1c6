// Checkpoint content of cairn-bench and its verification.
//
// The application buffer holds a fixed pseudo-random base pattern (a function
// of the byte offset only). Each step "modifies" the buffer by stamping two
// words of every 4 KiB page (the first and the last full word of the page) with
// a value derived from (tag, page index); a partial last page gets only the
// first. Stamping is cheap (two stores per page) and makes every step's
// content distinct and position-dependent.
//
// Verification of a restored buffer of n bytes for tag t:
//   - every page's two stamp words must be those of (t, page): catches a
//     wrong/stale step, a partial copy, shifted or swapped pages;
//   - a sample of pages is compared in full (base + stamps): page 0, the last
//     page and every 64th page starting at t % 64 (so consecutive steps cover
//     different pages); `full` compares every page.
// With --change-fraction < 1 a version stamps only some pages (StampPages);
// each page must then hold the stamps of the version that stamped it last
// (VerifyPages; changes.hpp replays which one that is).
// Stamp slots are at fixed offsets (page start, page end - 8) and stamping
// re-bases a partial last page, so after Stamp(n, tag) the bytes [0, n) depend
// only on (n, tag), never on which steps were stamped before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "driver/bench.hpp"

namespace cairn::bench {

inline constexpr size_t kPage = 4096;

// Writes the base pattern into [buf, buf+n).
void FillBase(uint8_t* buf, size_t n);
// Writes the stamps of `tag` into the pages of [buf, buf+n).
void Stamp(uint8_t* buf, size_t n, uint64_t tag);
// Writes the stamps of `tag` into the listed pages of [buf, buf+n) only
// (--change-fraction < 1: the pages a version changes, changes.hpp).
void StampPages(uint8_t* buf, size_t n, uint64_t tag, const std::vector<uint32_t>& pages);
// The tag of step/version `index` in trial `salt` (distinct across trials, so
// data left over from another trial is detected).
inline uint64_t MakeTag(uint64_t salt, uint64_t index) { return (salt << 40) ^ index; }

// Checks [buf, buf+n) against (base, tag) as described above. On a mismatch
// records "<what>: ..." in stats and returns false.
bool Verify(const uint8_t* buf, size_t n, uint64_t tag, bool full, const std::string& what,
            VerifyStats& stats);
// The same checks when page p must hold the stamps of page_tags[p] (one tag
// per page: the tag of the version that stamped it last); `phase_tag` picks
// the sample of pages compared in full.
bool VerifyPages(const uint8_t* buf, size_t n, const std::vector<uint64_t>& page_tags,
                 uint64_t phase_tag, bool full, const std::string& what, VerifyStats& stats);

}  // namespace cairn::bench
