// L2 partner copies (partner.hpp; docs/format.md 3.8 is normative).
#include "redundancy/partner/partner.hpp"

#include <algorithm>
#include <map>

#include "redundancy/bundle_exchange.hpp"

namespace cairn::partner {

std::string CopyDir(const Config& c, int source) {
  return c.scratch_dir + "/.partner/rank" + std::to_string(source);
}

namespace {

using redundancy::Get;
using redundancy::Put;

// This member's bundle of `version` in dir/name for `to`; a reader that
// cannot open it sends nothing (*opened, when given, says why).
redundancy::BundleSend SendOf(const Config& config, const std::string& dir, const std::string& name,
                              int64_t version, int to, Status* opened = nullptr) {
  auto reader = redundancy::BundleReader::Open(config, dir, name, version);
  if (opened != nullptr) *opened = reader.status();
  return {.to = to, .reader = reader.ok() ? std::move(*reader) : nullptr};
}

// Where source's copies of `name` go in this holder's directory.
redundancy::BundleReceive CopyOf(const Config& config, int source, const std::string& name) {
  return {.from = source, .dir = CopyDir(config, source) + "/" + name};
}

// After a copy of source's was stored: keep the newest keep_versions there
// (with their chains).
void RetainCopies(const Config& config, int source, const std::string& name) {
  redundancy::Retain(config, CopyDir(config, source), name, /*chains=*/true);
}

}  // namespace

Map MapFromNodes(const std::vector<int>& node_of, int rank) {
  std::map<int, std::vector<int>> members;  // node -> its ranks, in rank order
  for (int r = 0; r < static_cast<int>(node_of.size()); ++r) members[node_of[r]].push_back(r);
  std::vector<int> nodes;
  for (const auto& [n, ranks] : members) nodes.push_back(n);
  auto partner_of = [&](int r) {
    const auto at = std::lower_bound(nodes.begin(), nodes.end(), node_of[r]) - nodes.begin();
    const std::vector<int>& here = members[node_of[r]];
    const std::vector<int>& next = members[nodes[(at + 1) % nodes.size()]];
    const auto i = std::find(here.begin(), here.end(), r) - here.begin();
    return next[static_cast<size_t>(i) % next.size()];
  };
  Map map;
  if (nodes.size() < 2) return map;
  map.partner = partner_of(rank);
  for (int s = 0; s < static_cast<int>(node_of.size()); ++s) {
    if (partner_of(s) == rank) map.sources.push_back(s);
  }
  return map;
}

Result<Map> MakeMap(Group& group) {
  CAIRN_ASSIGN_OR_RETURN(std::vector<int> node_of, redundancy::NodesOf(group));
  Map map = MapFromNodes(node_of, group.rank());
  if (map.partner < 0) {
    return Status::Config("CAIRN_L2_EVERY: partner copies need ranks on at least two nodes; all " +
                          std::to_string(group.size()) +
                          " ranks are on one (CAIRN_MPI_RANKS_PER_NODE simulates nodes)");
  }
  return map;
}

Status Replicate(Group& group, const Map& map, const Config& config, const std::string& name,
                 int64_t version) {
  // A rank whose own file cannot be read still takes part (its partner
  // expects its messages): it sends nothing, which stores nothing.
  Status s;
  std::vector<redundancy::BundleSend> sends;
  sends.push_back(SendOf(config, config.scratch_dir, name, version, map.partner, &s));
  std::vector<redundancy::BundleReceive> receives;
  for (int source : map.sources) receives.push_back(CopyOf(config, source, name));
  CAIRN_ASSIGN_OR_RETURN(auto outcome,
                         redundancy::ExchangeBundles(group, config, std::move(sends), receives));
  if (s.ok()) s = outcome.sent[0];
  s = s.WithContext("the partner copy of version " + std::to_string(version));
  for (size_t i = 0; i < receives.size(); ++i) {
    const Status& stored = outcome.received[i];
    if (stored.ok()) RetainCopies(config, map.sources[i], name);
    // The source reports its own failure to send.
    if (s.ok() && !stored.ok() && stored.code() != Code::kNotFound) s = stored;
  }
  return s;
}

namespace {

// Recover's steps for the partner level: each holder tells each source
// which copies it keeps (Offers); members that lack the agreed version ask
// their partner, which sends its copy back (Fetch).
class PartnerLevel final : public redundancy::Level {
 public:
  PartnerLevel(Group& group, const Map& map, const Config& config, bool refill)
      : group_(group), map_(map), config_(config), refill_(refill) {}

  Result<std::vector<int64_t>> Offers(const std::string& name, int64_t, int64_t) override {
    std::vector<std::vector<uint8_t>> lists(map_.sources.size());
    std::vector<Group::Outgoing> sends;
    keeps_.assign(map_.sources.size(), {});
    for (size_t i = 0; i < map_.sources.size(); ++i) {
      keeps_[i] = redundancy::Intact(config_, CopyDir(config_, map_.sources[i]), name);
      for (int64_t v : keeps_[i]) Put(&lists[i], v);
      sends.push_back({.to = map_.sources[i], .data = lists[i].data(), .bytes = lists[i].size()});
    }
    std::vector<std::vector<uint8_t>> got;
    CAIRN_RETURN_IF_ERROR(group_.Exchange(sends, {map_.partner}, &got));
    size_t at = 0;
    for (int64_t v = 0; Get(got[0], &at, &v);) held_.push_back(v);
    return held_;
  }

  Result<std::string> Fetch(const std::string& name, int64_t v, bool need) override {
    const bool ask = need && std::find(held_.begin(), held_.end(), v) != held_.end();
    std::vector<uint8_t> request;
    Put(&request, ask ? v : -1);
    std::vector<std::vector<uint8_t>> got;
    CAIRN_RETURN_IF_ERROR(group_.Exchange(
        {{.to = map_.partner, .data = request.data(), .bytes = request.size()}}, map_.sources, &got));
    // Holders send the asked copies; askers commit them locally. An
    // unreadable copy sends nothing: the asker then finds no file and the
    // collective restore falls back as for any damage.
    std::vector<redundancy::BundleSend> sends;
    for (size_t i = 0; i < map_.sources.size(); ++i) {
      int64_t asked = -1;
      size_t at = 0;
      if (!Get(got[i], &at, &asked) || asked < 0) continue;
      sends.push_back(
          SendOf(config_, CopyDir(config_, map_.sources[i]), name, asked, map_.sources[i]));
    }
    std::vector<redundancy::BundleReceive> receives;
    if (ask) receives.push_back({.from = map_.partner, .dir = config_.scratch_dir + "/" + name});
    CAIRN_ASSIGN_OR_RETURN(
        auto outcome, redundancy::ExchangeBundles(group_, config_, std::move(sends), receives));
    if (!ask || outcome.received[0].code() == Code::kNotFound) return std::string();
    CAIRN_RETURN_IF_ERROR(outcome.received[0]);
    return "version " + std::to_string(v) + " of '" + name + "' from its partner copy on rank " +
           std::to_string(map_.partner) + " (L2)";
  }

  // A member whose partner did not keep v (Offers: its node was lost, or
  // the copy was damaged) sends it its copy again; the holder, which knows
  // the same from its lists, receives and stores it as Replicate does.
  Status Refill(const std::string& name, int64_t v) override {
    if (!refill_) return Status::Ok();
    auto lacks = [v](const std::vector<int64_t>& kept) { return std::find(kept.begin(), kept.end(), v) == kept.end(); };
    const bool resend = lacks(held_);
    partner_lost_ = resend;
    Status read;
    std::vector<redundancy::BundleSend> sends;
    if (resend) sends.push_back(SendOf(config_, config_.scratch_dir, name, v, map_.partner, &read));
    std::vector<redundancy::BundleReceive> receives;
    for (size_t i = 0; i < map_.sources.size(); ++i)
      if (lacks(keeps_[i])) receives.push_back(CopyOf(config_, map_.sources[i], name));
    CAIRN_ASSIGN_OR_RETURN(
        auto outcome, redundancy::ExchangeBundles(group_, config_, std::move(sends), receives));
    const std::string what = "version " + std::to_string(v) + " of '" + name + "'";
    if (resend) {
      if (read.ok()) read = outcome.sent[0];
      notes_.push_back(read.ok() ? what + ": its partner copy sent again to rank " + std::to_string(map_.partner) +
                                       ", which had lost it (L2)"
                                 : read.WithContext(what + ": its partner copy cannot be sent again").ToString());
    }
    for (size_t i = 0; i < receives.size(); ++i) {
      const Status& stored = outcome.received[i];
      if (stored.ok()) {
        RetainCopies(config_, receives[i].from, name);
      } else if (stored.code() != Code::kNotFound) {
        notes_.push_back(stored.ToString());
      }
    }
    return Status::Ok();
  }

  // The partner lost v's copy (a lost node, or damage): the older versions
  // it kept for this member are gone with it. Those its retention keeps
  // (keep_versions - 1 below v) go again, by the background transfers.
  std::vector<int64_t> Older(int64_t v, const std::vector<int64_t>& intact) const override {
    std::vector<int64_t> out;
    if (!partner_lost_) return out;
    const size_t room =
        config_.keep_versions > 0 ? static_cast<size_t>(config_.keep_versions) - 1 : intact.size();
    for (int64_t w : intact) {
      if (out.size() >= room) break;
      if (w < v && std::find(held_.begin(), held_.end(), w) == held_.end()) out.push_back(w);
    }
    return out;
  }

  std::vector<std::string> Notes() const override { return notes_; }

 private:
  Group& group_;
  const Map& map_;
  const Config& config_;
  const bool refill_;
  std::vector<int64_t> held_;                // the partner's copies of this member, newest first
  std::vector<std::vector<int64_t>> keeps_;  // this member's copies of each source, as Offers told them
  std::vector<std::string> notes_;
  bool partner_lost_ = false;  // Refill: the partner had no copy of the agreed version
};

}  // namespace

std::unique_ptr<redundancy::Level> MakeLevel(Group& group, const Map& map, const Config& config,
                                             bool refill) {
  return std::make_unique<PartnerLevel>(group, map, config, refill);
}

}  // namespace cairn::partner
