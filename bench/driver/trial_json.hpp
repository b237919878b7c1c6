// One trial's results as the JSON object the document's "trials" arrays hold
// (docs/bench.md lists every field); the medians across trials are taken
// from these objects (report.cpp).
#pragma once

#include "common/json.hpp"
#include "driver/bench.hpp"

namespace cairn::bench {

Json TrialJson(const TrialResult& t, Workload w);

}  // namespace cairn::bench
