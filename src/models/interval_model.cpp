// The optimal checkpoint interval (interval_model.hpp).
#include "models/interval_model.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace cairn::core {

double OptimalInterval(double checkpoint_s, double restore_s, double mtbf_s) {
  const double c = std::max(checkpoint_s, 0.0);
  const double margin = std::max(mtbf_s - std::max(restore_s, 0.0), 0.0);
  return std::max(c, std::sqrt(2 * c * margin));
}

double ExpectedWaste(double checkpoint_s, double restore_s, double mtbf_s, double interval_s) {
  if (!(mtbf_s > 0)) return 1;
  // A free checkpoint taken continuously: only the restore is lost (T -> 0).
  if (checkpoint_s <= 0 && interval_s <= 0) return std::clamp(restore_s / mtbf_s, 0.0, 1.0);
  if (!(interval_s > 0)) return 1;
  const double work = (1 - checkpoint_s / interval_s) * (1 - (restore_s + interval_s / 2) / mtbf_s);
  if (!(work > 0)) return 1;  // both factors negative is no gain either
  return std::clamp(1 - work, 0.0, 1.0);
}

void IntervalModel::OnCheckpoint(const std::string& name, int64_t version, uint64_t bytes, double blocking_s,
                                 SteadyTime end) {
  PerName& p = names_[name];
  // A version checkpointed again (after kExists was cleared) replaces its
  // sample rather than counting twice.
  std::erase_if(p.window, [&](const Sample& s) { return s.version == version; });
  p.window.push_back({version, std::max(blocking_s, 0.0)});
  while (p.window.size() > kWindow) p.window.pop_front();
  p.bytes = bytes;
  p.end = end;
}

void IntervalModel::OnWait(const std::string& name, int64_t version, double blocking_s, SteadyTime end) {
  auto it = names_.find(name);
  if (it == names_.end()) return;
  PerName& p = it->second;
  for (Sample& s : p.window) {
    if (s.version == version) s.cost_s += std::max(blocking_s, 0.0);
  }
  if (!p.window.empty() && p.window.back().version == version) p.end = std::max(p.end, end);
}

void IntervalModel::OnRestore(const std::string& name, uint64_t bytes, double seconds) {
  names_[name].restore_s = std::max(seconds, 0.0);
  if (bytes > 0 && seconds > 0) read_bytes_per_s_ = static_cast<double>(bytes) / seconds;
}

double IntervalModel::MedianCost(const PerName& p) const {
  std::vector<double> costs;
  for (const Sample& s : p.window) costs.push_back(s.cost_s);
  std::sort(costs.begin(), costs.end());
  const size_t n = costs.size();
  return n % 2 == 1 ? costs[n / 2] : (costs[n / 2 - 1] + costs[n / 2]) / 2;
}

IntervalDecision IntervalModel::Due(const std::string& name, double mtbf_s, SteadyTime now) const {
  IntervalDecision d;
  auto it = names_.find(name);
  if (it == names_.end() || it->second.window.empty()) {
    // The first checkpoint measures the cost. A name only restored so far
    // still reports its restore cost.
    if (it != names_.end() && it->second.restore_s >= 0) {
      d.restore_s = it->second.restore_s;
      d.restore_measured = true;
    }
    return d;
  }
  const PerName& p = it->second;
  d.measured = true;
  d.checkpoint_s = MedianCost(p);
  d.restore_measured = p.restore_s >= 0;
  const double bandwidth = read_bytes_per_s_ > 0 ? read_bytes_per_s_ : kDefaultReadBytesPerS;
  d.restore_s = d.restore_measured ? p.restore_s : static_cast<double>(p.bytes) / bandwidth;
  d.interval_s = OptimalInterval(d.checkpoint_s, d.restore_s, mtbf_s);
  d.waste = ExpectedWaste(d.checkpoint_s, d.restore_s, mtbf_s, d.interval_s);
  d.due = SecondsBetween(p.end, now) >= d.interval_s;
  return d;
}

}  // namespace cairn::core
