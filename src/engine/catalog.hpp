// The catalog: the entries in the pipeline, by (kind, name, number), and the
// open histories with their steps. Every stage looks entries up here; it
// also hands out the capture rank (Entry::seq, the eviction order).
//
// No lock of its own: the pipeline holds it as state guarded by its mutex
// (Pipeline::catalog_ is CAIRN_GUARDED_BY(mu_), so every call is checked to
// run under mu_).
#pragma once

#include <climits>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "engine/entry.hpp"

namespace cairn::core {

class Catalog {
 public:
  struct History {
    bool popping = false;     // a pop happened: the prefetchers serve it
    std::set<int64_t> steps;  // pushed and not consumed
  };

  EntryPtr Find(format::EntryKind kind, const std::string& name, int64_t number) const {
    auto it = entries_.find(Key{kind, name, number});
    return it == entries_.end() ? nullptr : it->second;
  }

  // Whether checkpoint version v of `name` is on its way to the persistent
  // tier (the persister, or a copy queued earlier).
  bool Persisting(const std::string& name, int64_t v) const {
    const EntryPtr e = Find(format::EntryKind::kCheckpoint, name, v);
    return e && e->persist().pending;
  }
  // The base of checkpoint version v of `name` (-1: a full version) while it
  // is in the pipeline; nullopt otherwise (a file of an earlier run: its
  // header says).
  std::optional<int64_t> BaseOf(const std::string& name, int64_t v) const {
    const EntryPtr e = Find(format::EntryKind::kCheckpoint, name, v);
    if (!e) return std::nullopt;
    return e->layout.record.base_version;
  }
  // Registers e with the next capture rank (e->seq); a history step also
  // joins its history's steps. Preconditions: nothing is registered under
  // e's key, and a step's history is open.
  void Add(const EntryPtr& e) {
    e->seq = next_seq_++;
    entries_.emplace(Key{e->kind, e->name, e->number}, e);
    if (e->kind == format::EntryKind::kHistoryStep) histories_[e->name].steps.insert(e->number);
  }

  // Forgets e's key (the entry is consumed); its step, if any, stays listed
  // until DropStep.
  void Remove(const Entry& e) { entries_.erase(Key{e.kind, e.name, e.number}); }
  void ClearEntries() { entries_.clear(); }
  // The checkpoints of `name` not yet committed locally (nor failed) that
  // are layered on version `base`.
  std::vector<EntryPtr> LayersOn(const std::string& name, int64_t base) const {
    const auto kind = format::EntryKind::kCheckpoint;
    std::vector<EntryPtr> out;
    for (auto it = entries_.lower_bound(Key{kind, name, INT64_MIN});
         it != entries_.end() && std::get<0>(it->first) == kind && std::get<1>(it->first) == name; ++it) {
      const Entry& e = *it->second;
      if (e.layout.record.base_version == base && !e.local().committed && !e.failed())
        out.push_back(it->second);
    }
    return out;
  }
  bool IsBaseOfUncommitted(const std::string& name, int64_t base) const { return !LayersOn(name, base).empty(); }

  // Whether every checkpoint of `name` has reached its last tier or failed:
  // committed locally and, when `persistent` (there is a persistent tier),
  // persisted unless its capture skipped that tier or its copy failed.
  bool Settled(const std::string& name, bool persistent) const {
    const auto kind = format::EntryKind::kCheckpoint;
    for (auto it = entries_.lower_bound(Key{kind, name, INT64_MIN});
         it != entries_.end() && std::get<0>(it->first) == kind && std::get<1>(it->first) == name; ++it) {
      const Entry& e = *it->second;
      if (e.failed() || e.consumed()) continue;
      if (!e.local().committed) return false;
      if (persistent && !e.persist().skipped && !e.persist().committed && e.persist().error.ok())
        return false;
    }
    return true;
  }

  // Histories --------------------------------------------------------------
  bool HasHistory(const std::string& name) const { return histories_.contains(name); }
  History* FindHistory(const std::string& name) {
    auto it = histories_.find(name);
    return it == histories_.end() ? nullptr : &it->second;
  }
  History& OpenHistory(const std::string& name) { return histories_[name]; }
  void CloseHistory(const std::string& name) { histories_.erase(name); }
  // The step is popped or never was (a failed capture): no longer listed.
  void DropStep(const std::string& name, int64_t step) {
    if (History* h = FindHistory(name)) h->steps.erase(step);
  }
  std::map<std::string, History>& histories() { return histories_; }
  const std::map<std::string, History>& histories() const { return histories_; }

 private:
  using Key = std::tuple<format::EntryKind, std::string, int64_t>;

  std::map<Key, EntryPtr> entries_;
  std::map<std::string, History> histories_;
  uint64_t next_seq_ = 0;
};

}  // namespace cairn::core
