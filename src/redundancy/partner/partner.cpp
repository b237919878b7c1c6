// L2 partner copies (partner.hpp; docs/format.md 3.8 is normative).
#include "redundancy/partner/partner.hpp"

#include <algorithm>
#include <map>

namespace cairn::partner {

std::string CopyDir(const Config& c, int source) {
  return c.scratch_dir + "/.partner/rank" + std::to_string(source);
}

namespace {

using redundancy::Bundle;
using redundancy::Get;
using redundancy::Put;

// Stores source's copy (a bundle it sent) in this holder's directory of it
// and keeps the newest keep_versions there (with their chains).
Status StoreCopy(const Config& config, int source, const std::string& name, const std::vector<uint8_t>& bundle) {
  CAIRN_RETURN_IF_ERROR(redundancy::Unbundle(config, CopyDir(config, source) + "/" + name, bundle,
                                             "rank " + std::to_string(source)));
  redundancy::Retain(config, CopyDir(config, source), name, /*chains=*/true);
  return Status::Ok();
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
  auto mine = Bundle(config, config.scratch_dir, name, version);
  std::vector<Group::Outgoing> sends;
  if (mine.ok()) sends.push_back({.to = map.partner, .data = mine->data(), .bytes = mine->size()});
  // A rank whose own file cannot be read still takes part (its partner
  // expects a message): it sends an empty one, which stores nothing.
  static const uint8_t kNothing = 0;
  if (!mine.ok()) sends.push_back({.to = map.partner, .data = &kNothing, .bytes = 0});
  std::vector<std::vector<uint8_t>> got;
  CAIRN_RETURN_IF_ERROR(group.Exchange(sends, map.sources, &got));
  Status s = mine.status().WithContext("the partner copy of version " + std::to_string(version));
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].empty()) continue;
    Status stored = StoreCopy(config, map.sources[i], name, got[i]);
    if (s.ok()) s = stored;
  }
  return s;
}

namespace {

// Recover's steps for the partner level: each holder tells each source
// which copies it keeps (Offers); members that lack the agreed version ask
// their partner, which sends its copy back (Fetch).
class PartnerLevel final : public redundancy::Level {
 public:
  PartnerLevel(Group& group, const Map& map, const Config& config)
      : group_(group), map_(map), config_(config) {}

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
    // Holders send the asked copies; askers commit them locally.
    std::vector<std::vector<uint8_t>> bundles(map_.sources.size());
    std::vector<Group::Outgoing> sends;
    for (size_t i = 0; i < map_.sources.size(); ++i) {
      int64_t asked = -1;
      size_t at = 0;
      if (!Get(got[i], &at, &asked) || asked < 0) continue;
      auto bundle = Bundle(config_, CopyDir(config_, map_.sources[i]), name, asked);
      // An unreadable copy is sent as an empty message: the asker then finds
      // no file and the collective restore falls back as for any damage.
      if (bundle.ok()) bundles[i] = std::move(*bundle);
      sends.push_back({.to = map_.sources[i], .data = bundles[i].data(), .bytes = bundles[i].size()});
    }
    CAIRN_RETURN_IF_ERROR(
        group_.Exchange(sends, ask ? std::vector<int>{map_.partner} : std::vector<int>{}, &got));
    if (!ask || got[0].empty()) return std::string();
    CAIRN_RETURN_IF_ERROR(redundancy::Unbundle(config_, config_.scratch_dir + "/" + name, got[0],
                                               "rank " + std::to_string(map_.partner)));
    return "version " + std::to_string(v) + " of '" + name + "' from its partner copy on rank " +
           std::to_string(map_.partner) + " (L2)";
  }

  // A member whose partner did not keep v (Offers: its node was lost, or
  // the copy was damaged) sends it its copy again; the holder, which knows
  // the same from its lists, receives and stores it as Replicate does.
  Status Refill(const std::string& name, int64_t v) override {
    auto lacks = [v](const std::vector<int64_t>& kept) { return std::find(kept.begin(), kept.end(), v) == kept.end(); };
    const bool resend = lacks(held_);
    partner_lost_ = resend;
    std::vector<uint8_t> mine;
    Status read;
    if (resend) {
      auto bundle = Bundle(config_, config_.scratch_dir, name, v);
      if (bundle.ok()) mine = std::move(*bundle);  // else an empty message: the holder stores nothing
      read = bundle.status();
    }
    std::vector<Group::Outgoing> sends;
    if (resend) sends.push_back({.to = map_.partner, .data = mine.data(), .bytes = mine.size()});
    std::vector<int> from;
    for (size_t i = 0; i < map_.sources.size(); ++i)
      if (lacks(keeps_[i])) from.push_back(map_.sources[i]);
    std::vector<std::vector<uint8_t>> got;
    CAIRN_RETURN_IF_ERROR(group_.Exchange(sends, from, &got));
    const std::string what = "version " + std::to_string(v) + " of '" + name + "'";
    if (resend) {
      notes_.push_back(read.ok() ? what + ": its partner copy sent again to rank " + std::to_string(map_.partner) +
                                       ", which had lost it (L2)"
                                 : read.WithContext(what + ": its partner copy cannot be sent again").ToString());
    }
    for (size_t i = 0; i < from.size(); ++i) {
      if (got[i].empty()) continue;
      if (Status stored = StoreCopy(config_, from[i], name, got[i]); !stored.ok()) notes_.push_back(stored.ToString());
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
  std::vector<int64_t> held_;                // the partner's copies of this member, newest first
  std::vector<std::vector<int64_t>> keeps_;  // this member's copies of each source, as Offers told them
  std::vector<std::string> notes_;
  bool partner_lost_ = false;  // Refill: the partner had no copy of the agreed version
};

}  // namespace

std::unique_ptr<redundancy::Level> MakeLevel(Group& group, const Map& map, const Config& config) {
  return std::make_unique<PartnerLevel>(group, map, config);
}

}  // namespace cairn::partner
