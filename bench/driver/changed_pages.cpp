#include "driver/changed_pages.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace cairn::bench {
namespace {

// splitmix64: a small, seedable generator whose sequence is the same in every
// process and with every standard library (std:: distributions are not).
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t x = (s_ += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }
  // Uniform in [0, n), n > 0 (the modulo bias is < n / 2^64).
  size_t Below(size_t n) { return static_cast<size_t>(Next() % n); }

 private:
  uint64_t s_;
};

// The first k of a random permutation of `items` (partial Fisher-Yates).
void DrawFirst(std::vector<uint32_t>& items, size_t k, Rng& rng) {
  k = std::min(k, items.size());
  for (size_t i = 0; i < k; ++i) std::swap(items[i], items[i + rng.Below(items.size() - i)]);
  items.resize(k);
}

std::vector<uint32_t> Iota(size_t n) {
  std::vector<uint32_t> v(n);
  std::iota(v.begin(), v.end(), 0u);
  return v;
}

size_t ChangedCount(double fraction, size_t pages) {
  const double m = std::ceil(fraction * static_cast<double>(pages));
  return std::clamp<size_t>(static_cast<size_t>(m), 1, pages);
}

}  // namespace

const char* ChangePatternName(ChangePattern p) {
  switch (p) {
    case ChangePattern::kRandomPages: return "random-pages";
    case ChangePattern::kRuns: return "runs";
    case ChangePattern::kStrided: return "strided";
    case ChangePattern::kHot: return "hot";
  }
  return "?";
}

Result<ChangePattern> ParseChangePattern(const std::string& text) {
  for (ChangePattern p : {ChangePattern::kRandomPages, ChangePattern::kRuns,
                          ChangePattern::kStrided, ChangePattern::kHot}) {
    if (text == ChangePatternName(p)) return p;
  }
  return Status::InvalidArgument("expected random-pages, runs, strided or hot, got '" + text + "'");
}

std::vector<uint32_t> ChangedPages(const ChangeSpec& spec, size_t pages, uint64_t salt,
                                   uint64_t v) {
  if (v == 0 || spec.all() || pages == 0) return Iota(pages);
  const size_t m = ChangedCount(spec.fraction, pages);
  // Distinct streams per (trial, version) and for the trial's hot set.
  Rng rng(salt * 0xd1b54a32d192ed03ull ^ (v + 1) * 0x8cb92ba72f3d8dd7ull);
  std::vector<uint32_t> out;
  switch (spec.pattern) {
    case ChangePattern::kRandomPages:
      out = Iota(pages);
      DrawFirst(out, m, rng);
      break;
    case ChangePattern::kRuns: {
      std::vector<uint32_t> runs = Iota((pages + kRunPages - 1) / kRunPages);
      DrawFirst(runs, (m + kRunPages - 1) / kRunPages, rng);
      for (uint32_t r : runs) {
        for (size_t p = r * kRunPages; p < std::min(pages, (r + 1) * kRunPages); ++p) {
          out.push_back(static_cast<uint32_t>(p));
        }
      }
      break;
    }
    case ChangePattern::kStrided: {
      const size_t k = std::max<size_t>(1, static_cast<size_t>(std::lround(1 / spec.fraction)));
      for (size_t p = v % k; p < pages; p += k) out.push_back(static_cast<uint32_t>(p));
      break;
    }
    case ChangePattern::kHot: {
      Rng hot_rng(salt * 0xd1b54a32d192ed03ull ^ 0x686f74ull);  // per trial, not per version
      std::vector<uint32_t> hot = Iota(pages);
      DrawFirst(hot, std::min(pages, 2 * m), hot_rng);
      DrawFirst(hot, m, rng);
      out = std::move(hot);
      break;
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<uint64_t> LastStampVersions(const ChangeSpec& spec, size_t pages, uint64_t salt,
                                        uint64_t v) {
  std::vector<uint64_t> last(pages, 0);
  if (spec.all()) {
    std::fill(last.begin(), last.end(), v);
    return last;
  }
  for (uint64_t u = 1; u <= v; ++u) {
    for (uint32_t p : ChangedPages(spec, pages, salt, u)) last[p] = u;
  }
  return last;
}

}  // namespace cairn::bench
