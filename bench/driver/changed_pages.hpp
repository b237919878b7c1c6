// Which pages of the application buffer change at each version of the
// restart workload (--change-fraction, --change-pattern), and, for
// verification, which version stamped each page last.
//
// Version 0 stamps every page (the first version is full anyway). Version
// v > 0 stamps the pages ChangedPages(spec, pages, salt, v) returns; with a
// fraction of 1 that is every page, whatever the pattern (the behaviour before
// the option existed). The choice is a pure function of (spec, pages, salt,
// v), so the verifier (also in the new process of the cold restart) replays it
// instead of storing it. Patterns, with m = ceil(F * pages):
//   random-pages  m distinct pages drawn at random each version;
//   runs          ceil(m / 16) distinct 64 KiB runs (16 pages, 64 KiB-aligned,
//                 the hash detector's default chunk) drawn at random;
//   strided       every k-th page, k = round(1 / F), starting at page v % k
//                 (so consecutive versions change different pages);
//   hot           a hot set of min(pages, 2m) pages drawn once per trial; each
//                 version draws m of them at random (the same pages change
//                 again and again).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cairn/status.hpp"

namespace cairn::bench {

enum class ChangePattern { kRandomPages, kRuns, kStrided, kHot };

struct ChangeSpec {
  double fraction = 1;  // (0, 1]
  ChangePattern pattern = ChangePattern::kRandomPages;
  bool all() const { return fraction >= 1; }
};

inline constexpr size_t kRunPages = 16;  // --change-pattern runs: 64 KiB

const char* ChangePatternName(ChangePattern p);
// "random-pages", "runs", "strided", "hot"; kInvalidArgument otherwise.
Result<ChangePattern> ParseChangePattern(const std::string& text);

// The sorted page indexes that version `v` of trial `salt` stamps, of a buffer
// of `pages` pages.
std::vector<uint32_t> ChangedPages(const ChangeSpec& spec, size_t pages, uint64_t salt, uint64_t v);

// For each page, the version that stamped it last, after versions 0..v.
std::vector<uint64_t> LastStampVersions(const ChangeSpec& spec, size_t pages, uint64_t salt,
                                        uint64_t v);

}  // namespace cairn::bench
