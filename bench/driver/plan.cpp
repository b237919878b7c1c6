// Options -> the per-step plan. For a trace, the file has one step per line:
//   SIZE [COMPUTE_MS]        e.g. "64MiB 12.5", "4 GiB", "1048576"
// '#' starts a comment; blank lines are ignored. A missing COMPUTE_MS means
// --interval-ms. Errors name the file and line (kInvalidArgument: a bad input
// file is a usage error).
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "driver/bench.hpp"
#include "cairn/config.hpp"

namespace cairn::bench {
namespace {

Result<std::vector<Step>> ReadTrace(const std::string& path, double default_ms) {
  std::ifstream in(path);
  if (!in) return Status::InvalidArgument("trace " + path + ": cannot open the file");
  std::vector<Step> steps;
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    auto bad = [&](const std::string& why) {
      return Status::InvalidArgument("trace " + path + ":" + std::to_string(lineno) + ": " + why);
    };
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::vector<std::string> tok;
    for (std::string w; words >> w;) tok.push_back(w);
    if (tok.empty()) continue;
    // "64 MiB" is one size: a unit given as its own word joins the number.
    size_t next = 1;
    std::string size_text = tok[0];
    if (tok.size() > 1 && std::isalpha(static_cast<unsigned char>(tok[1][0]))) {
      size_text += tok[1];
      next = 2;
    }
    Result<uint64_t> bytes = ParseSize(size_text);
    if (!bytes.ok()) return bad("bad size '" + size_text + "'");
    if (*bytes == 0) return bad("size must be greater than 0");
    Step s{*bytes, default_ms};
    if (next < tok.size()) {
      std::string ms = tok[next++];
      if (ms.size() > 2 && ms.compare(ms.size() - 2, 2, "ms") == 0) ms.resize(ms.size() - 2);
      char* end = nullptr;
      errno = 0;
      const double d = std::strtod(ms.c_str(), &end);
      if (ms.empty() || errno != 0 || end != ms.c_str() + ms.size() || !std::isfinite(d) ||
          d < 0 || d > 3.6e6) {
        return bad("bad compute interval '" + tok[next - 1] + "' (milliseconds)");
      }
      s.compute_ms = d;
    }
    if (next < tok.size()) return bad("unexpected '" + tok[next] + "'");
    steps.push_back(s);
  }
  if (in.bad()) return Status::InvalidArgument("trace " + path + ": read error");
  if (steps.empty()) return Status::InvalidArgument("trace " + path + ": no steps");
  return steps;
}

}  // namespace

Result<std::vector<Step>> BuildPlan(const Options& o) {
  if (o.workload == Workload::kTrace) {
    CAIRN_ASSIGN_OR_RETURN(std::vector<Step> steps, ReadTrace(o.trace_path, o.interval_ms));
    if (o.count > 0 && o.count < steps.size()) steps.resize(o.count);
    return steps;
  }
  return std::vector<Step>(o.count, Step{o.size, o.interval_ms});
}

uint64_t MaxBytes(const std::vector<Step>& plan) {
  uint64_t m = 0;
  for (const Step& s : plan) m = s.bytes > m ? s.bytes : m;
  return m;
}

uint64_t TotalBytes(const std::vector<Step>& plan) {
  uint64_t t = 0;
  for (const Step& s : plan) t += s.bytes;
  return t;
}

}  // namespace cairn::bench
