#include "capture/layering.hpp"

#include <algorithm>

#include "os/protect/page_tracker.hpp"

namespace cairn::core {

// ---------------------------------------------------------------------------
// Tracked ranges: one os::PageTracker per client, one tracked range per
// address, any number of subscribers (detectors of different checkpoint
// names over the same memory). The tracker re-arms a range at every Collect,
// so what one subscriber collects is kept for the others until they collect.

namespace {

struct Subscriber {
  ExtentList pending;      // written pages another subscriber collected
  std::string lost;        // tracking was lost since this one's last Collect
  bool suspended = false;  // auto deactivated its monitoring
};

struct Range {
  Range(void* a, uint64_t b) : addr(a), bytes(b) {}
  void* const addr;
  const uint64_t bytes;
  Mutex mu;
  bool tracked CAIRN_GUARDED_BY(mu) = false;
  std::map<uint64_t, Subscriber> subs CAIRN_GUARDED_BY(mu);
};

}  // namespace

class TrackedRanges {
 public:
  TrackedRanges() : tracker_(os::PageTracker::Create()) {}
  ~TrackedRanges() {
    MutexLock l(&mu_);
    for (auto& [addr, r] : ranges_) (void)tracker_->Untrack(r->addr);
  }

  // A PageSource for [data, data + bytes), or why this memory cannot be
  // tracked (not page-aligned, overlaps another tracked range, no mechanism).
  Result<std::unique_ptr<PageSource>> Subscribe(const void* data, uint64_t bytes);

  const os::PageTracker& tracker() const { return *tracker_; }

  // [data, data + bytes) is about to be overwritten by a restore: tracking
  // of every range it overlaps stops (no protection faults, and no read(2)
  // into protected memory, which fails under mprotect), and the next Collect
  // tracks again and reports the whole range.
  void Release(const void* data, uint64_t bytes);

 private:
  class Source;
  Result<ExtentList> Collect(Range& r, uint64_t id);
  void Suspend(Range& r, uint64_t id);
  void Unsubscribe(const std::shared_ptr<Range>& r, uint64_t id);

  const std::unique_ptr<os::PageTracker> tracker_;  // thread-safe on its own
  Mutex mu_;
  std::map<uintptr_t, std::shared_ptr<Range>> ranges_ CAIRN_GUARDED_BY(mu_);
  uint64_t next_id_ CAIRN_GUARDED_BY(mu_) = 0;
};

class TrackedRanges::Source final : public PageSource {
 public:
  Source(TrackedRanges* owner, std::shared_ptr<Range> range, uint64_t id)
      : owner_(owner), range_(std::move(range)), id_(id) {}
  ~Source() override { owner_->Unsubscribe(range_, id_); }
  Result<ExtentList> Collect() override { return owner_->Collect(*range_, id_); }
  void Suspend() override { owner_->Suspend(*range_, id_); }

 private:
  TrackedRanges* const owner_;
  const std::shared_ptr<Range> range_;
  const uint64_t id_;
};

Result<std::unique_ptr<PageSource>> TrackedRanges::Subscribe(const void* data, uint64_t bytes) {
  if (tracker_->mode() == os::TrackMode::kNone) {
    const std::string why = tracker_->stats().fallbacks;
    return Status::Unsupported("no page tracking mechanism works here" + (why.empty() ? "" : ": " + why));
  }
  CAIRN_RETURN_IF_ERROR(os::CheckTrackable(data, bytes));
  MutexLock l(&mu_);
  const auto key = reinterpret_cast<uintptr_t>(data);
  std::shared_ptr<Range>& r = ranges_[key];
  if (r && r->bytes != bytes) {
    return Status::Unsupported("memory at this address is tracked already with another size (" +
                               std::to_string(r->bytes) + " bytes, not " + std::to_string(bytes) + ")");
  }
  if (!r) {
    // Tracked now, so writes between this Plan and the next are seen.
    auto made = std::make_shared<Range>(const_cast<void*>(data), bytes);
    if (Status s = tracker_->Track(made->addr, bytes); !s.ok()) {
      ranges_.erase(key);
      return s;
    }
    MutexLock rl(&made->mu);
    made->tracked = true;
    r = std::move(made);
  }
  const uint64_t id = next_id_++;
  {
    MutexLock rl(&r->mu);
    r->subs[id];
  }
  return std::unique_ptr<PageSource>(std::make_unique<Source>(this, r, id));
}

Result<ExtentList> TrackedRanges::Collect(Range& r, uint64_t id) {
  MutexLock l(&r.mu);
  Subscriber& me = r.subs[id];
  me.suspended = false;
  if (!r.tracked) {
    // Suspended by every subscriber, or released for a restore: track again
    // from now. The tracker's first Collect reports everything; that report
    // is this one (for every subscriber), so it is consumed here.
    CAIRN_RETURN_IF_ERROR(tracker_->Track(r.addr, r.bytes));
    r.tracked = true;
    CAIRN_RETURN_IF_ERROR(tracker_->Collect(r.addr).status());
    for (auto& [k, sub] : r.subs) sub.pending = ExtentList{{0, r.bytes}};
    me.pending.clear();
    return ExtentList{{0, r.bytes}};
  }
  Result<os::Collection> c = tracker_->Collect(r.addr);
  if (!c.ok()) {
    for (auto& [k, sub] : r.subs) sub.lost = c.status().ToString();
  } else if (c->all && !c->note.empty()) {
    for (auto& [k, sub] : r.subs) sub.lost = c->note;
  }
  ExtentList out = c.ok() ? c->written : ExtentList{};
  for (auto& [k, sub] : r.subs) {
    if (k != id) sub.pending = UnionExtents(sub.pending, out);
  }
  out = UnionExtents(me.pending, out);
  me.pending.clear();
  if (!me.lost.empty()) {
    Status lost = Status::Unsupported("page tracking was lost: " + me.lost);
    me.lost.clear();
    return lost;
  }
  return out;
}

void TrackedRanges::Suspend(Range& r, uint64_t id) {
  MutexLock l(&r.mu);
  r.subs[id].suspended = true;
  const bool all = std::all_of(r.subs.begin(), r.subs.end(), [](const auto& kv) { return kv.second.suspended; });
  if (all && r.tracked) {
    (void)tracker_->Untrack(r.addr);  // monitoring off costs nothing
    r.tracked = false;
  }
}

void TrackedRanges::Release(const void* data, uint64_t bytes) {
  const auto lo = reinterpret_cast<uintptr_t>(data);
  const uintptr_t hi = lo + bytes;
  MutexLock l(&mu_);
  for (auto& [addr, r] : ranges_) {
    if (addr >= hi || addr + r->bytes <= lo) continue;
    MutexLock rl(&r->mu);
    if (r->tracked) (void)tracker_->Untrack(r->addr);
    r->tracked = false;
  }
}

void TrackedRanges::Unsubscribe(const std::shared_ptr<Range>& r, uint64_t id) {
  MutexLock l(&mu_);
  MutexLock rl(&r->mu);
  r->subs.erase(id);
  if (!r->subs.empty()) return;
  if (r->tracked) (void)tracker_->Untrack(r->addr);
  r->tracked = false;
  auto it = ranges_.find(reinterpret_cast<uintptr_t>(r->addr));
  if (it != ranges_.end() && it->second == r) ranges_.erase(it);
}

// ---------------------------------------------------------------------------
// Layering

namespace {

void Add(ChangeCounters& to, const ChangeCounters& c) {
  to.detects += c.detects;
  to.layered += c.layered;
  to.bytes_examined += c.bytes_examined;
  to.bytes_changed += c.bytes_changed;
  to.bytes_hashed += c.bytes_hashed;
  to.fallbacks += c.fallbacks;
  to.deactivations += c.deactivations;
}

bool SameRegions(const std::vector<Layering::CaptureRegion>& was, const std::vector<CaptureSource>& now,
                 ChangeDetection client_mode) {
  if (was.size() != now.size()) return false;
  for (size_t i = 0; i < now.size(); ++i) {
    const auto& a = was[i].spec;
    const auto& b = now[i].spec;
    if (a.id != b.id || a.memory != b.memory || a.bytes != b.bytes ||
        was[i].mode != now[i].changes.value_or(client_mode)) {
      return false;
    }
    // Tracking follows an address; a hash compares contents wherever they
    // are (a state dict's arrays may be new objects at every save).
    const bool tracked = was[i].mode == ChangeDetection::kPages || was[i].mode == ChangeDetection::kAuto;
    if (tracked && was[i].data != now[i].data) return false;
  }
  return true;
}

}  // namespace

Layering::Layering(const ChangeOptions& options, uint32_t block_bytes)
    : options_(options), block_bytes_(block_bytes) {
  stats_.mode = ChangeDetectionName(options.mode);
}

Layering::~Layering() {
  MutexLock l(&mu_);
  names_.clear();  // the detectors' page sources unsubscribe first
  live_.clear();
  ranges_.reset();  // then what is still tracked is released
}

void Layering::NoteFallback(const std::string& why) {
  ++stats_.fallbacks;
  if (stats_.fallback_note.empty()) stats_.fallback_note = why;
}

void Layering::Retire(const std::shared_ptr<ChangeDetector>& d) {
  if (!d) return;
  Add(retired_, d->counters());
  std::erase(live_, d);
}

void Layering::SetPageSources(PageSourceFactory f) {
  MutexLock l(&mu_);
  page_sources_ = std::move(f);
}

Result<std::unique_ptr<ChangeDetector>> Layering::MakeDetector(const CaptureSource& s) {
  ChangeOptions o = options_;
  o.mode = s.changes.value_or(options_.mode);
  std::unique_ptr<PageSource> pages;
  if (o.mode == ChangeDetection::kPages && page_sources_) {
    pages = page_sources_(s.data, s.spec.bytes);
  } else if (o.mode == ChangeDetection::kPages || o.mode == ChangeDetection::kAuto) {
    if (!ranges_) ranges_ = std::make_unique<TrackedRanges>();
    Result<std::unique_ptr<PageSource>> sub = ranges_->Subscribe(s.data, s.spec.bytes);
    if (sub.ok()) {
      pages = std::move(*sub);
    } else {
      // `pages` hashes what it cannot track; `auto` does so by design.
      NoteFallback("region " + std::to_string(s.spec.id) + ": " + sub.status().message() + "; hashed instead");
      o.mode = ChangeDetection::kHash;
    }
  }
  return MakeChangeDetector(o, std::move(pages));
}

std::vector<std::shared_ptr<ChangeDetector>> Layering::Detectors(Name& n,
                                                                 const std::vector<CaptureSource>& sources) {
  if (!SameRegions(n.regions, sources, options_.mode)) {
    for (auto& r : n.regions) Retire(r.detector);
    n.regions.clear();
    for (const auto& s : sources) {
      CaptureRegion r{.spec = s.spec, .data = s.data, .mode = s.changes.value_or(options_.mode)};
      if (s.spec.memory == MemoryKind::kHost && s.spec.bytes > 0 && r.mode != ChangeDetection::kFull) {
        Result<std::unique_ptr<ChangeDetector>> d = MakeDetector(s);
        if (d.ok()) {
          r.detector = std::move(*d);
          live_.push_back(r.detector);
        } else {
          NoteFallback("region " + std::to_string(s.spec.id) + ": " + d.status().message());
        }
      }
      n.regions.push_back(std::move(r));
    }
  }
  std::vector<std::shared_ptr<ChangeDetector>> out;
  for (const auto& r : n.regions) out.push_back(r.detector);
  return out;
}

std::vector<format::RegionSpec> SpecsOf(const std::vector<CaptureSource>& sources) {
  std::vector<format::RegionSpec> specs;
  specs.reserve(sources.size());
  for (const auto& s : sources) specs.push_back(s.spec);
  return specs;
}

LayerPlan Layering::Plan(const std::string& name, int64_t version, const std::vector<CaptureSource>& sources) {
  const std::vector<format::RegionSpec> specs = SpecsOf(sources);
  LayerPlan plan;
  const bool detect = enabled() || std::any_of(sources.begin(), sources.end(), [](const CaptureSource& s) {
                        return s.changes && *s.changes != ChangeDetection::kFull;
                      });
  if (!detect) {
    plan.layout = format::Layout::Make(specs, block_bytes_);
    return plan;
  }
  std::vector<std::shared_ptr<ChangeDetector>> detectors;
  {
    MutexLock l(&mu_);
    detectors = Detectors(names_[name], sources);
  }
  // Detection (hashing, collecting pages) without mu_: commits go on.
  std::vector<ChangeSet> sets(sources.size());
  std::vector<std::string> errors;
  for (size_t i = 0; i < sources.size(); ++i) {
    if (!detectors[i]) continue;  // stored full
    Result<ChangeSet> cs = detectors[i]->Detect(version, sources[i].data, sources[i].spec.bytes);
    plan.bytes_examined += sources[i].spec.bytes;
    if (cs.ok()) {
      sets[i] = std::move(*cs);
    } else {
      errors.push_back("region " + std::to_string(sources[i].spec.id) + ": " + cs.status().message());
    }
  }
  MutexLock l(&mu_);
  for (const auto& e : errors) NoteFallback(e);
  Name& n = names_[name];
  // The base: the newest that a layered region names, if this client planned
  // it and it was not dropped since (else every region is stored full). It
  // may still be in flight: the pipeline commits this version after it.
  int64_t base = -1;
  for (const auto& cs : sets) {
    if (!cs.full) base = std::max(base, cs.base);
  }
  format::VersionRecord record{.content_id = format::DrawContentId()};
  auto it = n.versions.find(base);
  if (base >= 0 && it != n.versions.end() && static_cast<int>(it->second.depth) < options_.max_layers) {
    record.base_version = base;
    record.base_content_id = it->second.content_id;
    record.depth = it->second.depth + 1;
  }
  std::vector<ExtentList> extents = format::Layout::FullExtents(specs);
  bool layered = false;
  for (size_t i = 0; i < sets.size(); ++i) {
    if (record.layered() && !sets[i].full && sets[i].base == base) {
      extents[i] = std::move(sets[i].changed);
      layered = true;
    }
  }
  if (!layered) record = format::VersionRecord{.content_id = record.content_id};
  plan.layout = format::Layout::MakeV2(specs, extents, block_bytes_, record);
  n.versions[version] = Planned{.content_id = record.content_id, .depth = record.depth};
  ++(layered ? stats_.layered_versions : stats_.full_versions);
  stats_.bytes_examined += plan.bytes_examined;
  stats_.bytes_stored += plan.layout.stored_bytes;
  return plan;
}

void Layering::Committed(const std::string& name, int64_t version) {
  MutexLock l(&mu_);
  auto nit = names_.find(name);
  if (nit == names_.end()) return;
  Name& n = nit->second;
  auto it = n.versions.find(version);
  if (it == n.versions.end()) return;
  it->second.committed = true;
  // Versions captured before it are never a base again (the detectors'
  // baselines only move forward); versions in flight stay.
  std::erase_if(n.versions, [&](const auto& kv) { return kv.first < version && kv.second.committed; });
  for (auto& r : n.regions) {
    if (r.detector) r.detector->Accept(version);
  }
}

void Layering::Dropped(const std::string& name, int64_t version) {
  MutexLock l(&mu_);
  auto nit = names_.find(name);
  if (nit == names_.end()) return;
  nit->second.versions.erase(version);
  for (auto& r : nit->second.regions) {
    if (r.detector) r.detector->Abandon(version);
  }
}

void Layering::BeforeRestore(const void* data, uint64_t bytes) {
  MutexLock l(&mu_);
  if (ranges_) ranges_->Release(data, bytes);
}

ChangeStats Layering::stats() const {
  MutexLock l(&mu_);
  ChangeStats s = stats_;
  ChangeCounters c = retired_;
  uint64_t deactivated = 0;
  for (const auto& d : live_) {
    const ChangeCounters dc = d->counters();
    Add(c, dc);
    deactivated += dc.deactivated ? 1 : 0;
  }
  s.bytes_hashed = c.bytes_hashed;
  s.fallbacks += c.fallbacks;
  s.deactivations = c.deactivations;
  s.deactivated_regions = deactivated;
  if (ranges_) {
    const os::PageTrackerStats t = ranges_->tracker().stats();
    s.tracker = os::TrackModeName(t.mode);
    s.tracking_faults = t.faults;
  }
  return s;
}

}  // namespace cairn::core
