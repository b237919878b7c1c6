#include "capture/changes.hpp"

#include <algorithm>
#include <optional>
#include <string>

#include "capture/copy_engine.hpp"
#include "util/mutex.hpp"

namespace cairn::core {

std::vector<Hash128> HashChunks(const void* data, uint64_t bytes, uint64_t chunk, CopyEngine* engine) {
  const RegionPiece piece{data, bytes};
  Result<std::vector<Hash128>> r = HashChunks(std::span<const RegionPiece>(&piece, 1), chunk, engine);
  return r.ok() ? std::move(*r) : std::vector<Hash128>{};  // fails only on a null `data` (precondition)
}

Result<std::vector<Hash128>> HashChunks(std::span<const RegionPiece> pieces, uint64_t chunk, CopyEngine* engine) {
  std::vector<RegionPiece> chunks;  // where each chunk is
  for (size_t k = 0; k < pieces.size(); ++k) {
    const RegionPiece& pc = pieces[k];
    if (k + 1 < pieces.size() && pc.bytes % chunk != 0) {
      return Status::InvalidArgument("change detection: piece " + std::to_string(k) + " of a region is " +
                                     std::to_string(pc.bytes) + " bytes, not a multiple of the hash chunk (" +
                                     std::to_string(chunk) + ")");
    }
    if (pc.data == nullptr && pc.bytes > 0) return Status::InvalidArgument("change detection of a null region");
    for (uint64_t off = 0; off < pc.bytes; off += chunk) {
      chunks.push_back({static_cast<const uint8_t*>(pc.data) + off, std::min(chunk, pc.bytes - off)});
    }
  }
  std::vector<Hash128> out(chunks.size());
  auto part = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) out[i] = HashBytes(chunks[i].data, chunks[i].bytes);
  };
  // Split like the copies: below 1 MiB the helpers' wake-up costs more.
  const size_t min_chunks = std::max<uint64_t>(1, CopyEngine::kMinParallelBytes / chunk);
  if (engine != nullptr) {
    engine->ForEach(out.size(), min_chunks, 1, part);
  } else {
    part(0, out.size());
  }
  return out;
}

ExtentList DiffChunks(const std::vector<Hash128>& before, const std::vector<Hash128>& now, uint64_t chunk,
                      uint64_t bytes) {
  ExtentList out;
  for (size_t i = 0; i < now.size(); ++i) {
    if (before[i] == now[i]) continue;
    const uint64_t off = i * chunk;
    AppendExtent(out, off, std::min(chunk, bytes - off));
  }
  return out;
}

ExtentList UnionExtents(const ExtentList& a, const ExtentList& b) {
  ExtentList out;
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    const bool take_a = j == b.size() || (i < a.size() && a[i].offset <= b[j].offset);
    const Extent& e = take_a ? a[i++] : b[j++];
    AppendExtent(out, e.offset, e.bytes);
  }
  return out;
}

namespace {

ChangeSet Full(uint64_t bytes) {
  ChangeSet cs;
  AppendExtent(cs.changed, 0, bytes);
  return cs;
}

// Counts a result and returns it.
ChangeSet Count(ChangeCounters& c, uint64_t bytes, ChangeSet cs) {
  c.detects += 1;
  c.layered += cs.full ? 0 : 1;
  c.bytes_examined += bytes;
  c.bytes_changed += ExtentBytes(cs.changed);
  return cs;
}

// The region's size, or why the pieces are not a region.
Result<uint64_t> CheckInput(std::span<const RegionPiece> pieces) {
  uint64_t bytes = 0;
  for (const RegionPiece& p : pieces) {
    if (p.data == nullptr && p.bytes > 0) return Status::InvalidArgument("change detection of a null region");
    bytes += p.bytes;
  }
  return bytes;
}

class FullDetector final : public ChangeDetector {
 public:
  Result<ChangeSet> DetectPieces(int64_t, std::span<const RegionPiece> pieces) override {
    Result<uint64_t> bytes = CheckInput(pieces);
    if (!bytes.ok()) return bytes.status();
    MutexLock l(&mu_);
    return Count(counters_, *bytes, Full(*bytes));
  }
  void Accept(int64_t) override {}
  void Abandon(int64_t) override {}
  void Reset() override {}
  ChangeCounters counters() const override {
    MutexLock l(&mu_);
    return counters_;
  }
  const char* name() const override { return "full"; }

 private:
  mutable Mutex mu_;
  ChangeCounters counters_ CAIRN_GUARDED_BY(mu_);
};

// The baseline bookkeeping shared by hash and pages: the accepted version
// and the results in flight, each with its detector-specific `State`. Order
// is the order of capture (`seq`), not of version numbers, which the
// application may reuse or give out of order.
//
// A new result is relative to the newest result that may still commit (in
// flight or accepted): when the application checkpoints faster than the
// flush, each version stores what changed since the previous capture, not
// since the last commit. The pipeline commits a layered version only after
// its base (the flush is FIFO) and fails it when its base fails, so a result
// whose base is abandoned is doomed too: it is never a base again.
template <typename State>
class Generations {
 public:
  struct Gen {
    uint64_t seq = 0;  // set by AddPending
    int64_t version = -1;
    uint32_t depth = 0;
    uint64_t bytes = 0;
    uint64_t base_seq = 0;  // the result it is layered on; 0 = full
    bool doomed = false;    // abandoned, or layered on a doomed result
    State state;
  };

  // The newest result that may still commit, if a layered version may refer
  // to it now (same size, chain not at max_layers).
  const Gen* Base(uint64_t bytes, int max_layers) const {
    if (pending_.size() >= kMaxPending) return nullptr;  // a full one starts afresh (AddPending)
    const Gen* g = Newest();
    if (g == nullptr || g->bytes != bytes) return nullptr;
    if (g->depth >= static_cast<uint32_t>(std::max(max_layers, 0))) return nullptr;
    return g;
  }
  // Records a result; `base` is what Base returned for it (null: full). An
  // earlier result of the same version (dropped, then captured again) is
  // doomed: Accept and Abandon name the newest.
  void AddPending(Gen g, const Gen* base) {
    g.base_seq = base != nullptr ? base->seq : 0;
    if (base == nullptr && pending_.size() >= kMaxPending) Reset();  // nothing refers to the rest
    for (Gen& p : pending_) {
      if (p.version == g.version) Doom(p.seq);
    }
    g.seq = ++seq_;
    pending_.push_back(std::move(g));
  }
  // Results captured before the accepted one are dropped: its data covers
  // their changes, and it is newer than any of them.
  void Accept(int64_t version) {
    auto it = std::find_if(pending_.begin(), pending_.end(),
                           [&](const Gen& g) { return g.version == version && !g.doomed; });
    if (it == pending_.end()) return;
    Gen g = std::move(*it);
    std::erase_if(pending_, [&](const Gen& p) { return p.seq <= g.seq; });
    accepted_ = std::move(g);
  }
  // The newest live result of `version` failed: it and every result layered
  // on it (directly or not) will never commit.
  void Abandon(int64_t version) {
    for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
      if (it->version == version && !it->doomed) return Doom(it->seq);
    }
  }
  std::vector<Gen>& pending() { return pending_; }
  void Reset() {
    accepted_.reset();
    pending_.clear();
  }

 private:
  const Gen* Newest() const {
    for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
      if (!it->doomed) return &*it;
    }
    return accepted_ ? &*accepted_ : nullptr;
  }
  // Dooms the result `seq` and, in capture order, those layered on a doomed one.
  void Doom(uint64_t seq) {
    for (Gen& p : pending_) {
      if (p.seq == seq || (p.base_seq != 0 && p.seq > seq && IsDoomed(p.base_seq))) p.doomed = true;
    }
  }
  bool IsDoomed(uint64_t seq) const {
    for (const Gen& p : pending_) {
      if (p.seq == seq) return p.doomed;
    }
    return false;  // the accepted one, or dropped by Accept: committed
  }

  // Results in flight kept at most (flushes failing for a long time): past
  // it the next result is full and the older ones are forgotten.
  static constexpr size_t kMaxPending = 256;

  std::optional<Gen> accepted_;
  std::vector<Gen> pending_;  // a few: the versions captured but not committed
  uint64_t seq_ = 0;
};

// What hash and pages share: their lock, their baseline bookkeeping, their
// counters, and Accept / Abandon / Reset / counters over them.
template <typename State>
class BaselineDetector : public ChangeDetector {
 public:
  explicit BaselineDetector(const ChangeOptions& o) : options_(o) {}
  void Accept(int64_t version) override {
    MutexLock l(&mu_);
    gens_.Accept(version);
  }
  void Abandon(int64_t version) override {
    MutexLock l(&mu_);
    gens_.Abandon(version);
  }
  void Reset() override {
    MutexLock l(&mu_);
    gens_.Reset();  // no baseline: the next result is full
  }
  ChangeCounters counters() const override {
    MutexLock l(&mu_);
    return counters_;
  }

 protected:
  const ChangeOptions options_;
  mutable Mutex mu_;
  Generations<State> gens_ CAIRN_GUARDED_BY(mu_);
  ChangeCounters counters_ CAIRN_GUARDED_BY(mu_);
};

ChangeSet Layered(int64_t base, uint32_t base_depth, ExtentList changed) {
  ChangeSet cs;
  cs.full = false;
  cs.base = base;
  cs.depth = base_depth + 1;
  cs.changed = std::move(changed);
  return cs;
}

class HashDetector final : public BaselineDetector<std::vector<Hash128>> {
 public:
  explicit HashDetector(const ChangeOptions& o) : BaselineDetector(o) {}

  Result<ChangeSet> DetectPieces(int64_t version, std::span<const RegionPiece> pieces) override {
    Result<uint64_t> size = CheckInput(pieces);
    if (!size.ok()) return size.status();
    const uint64_t bytes = *size;
    // Hashing (the long part) runs without the lock: Accept may come meanwhile.
    Result<std::vector<Hash128>> hashed = HashChunks(pieces, options_.hash_chunk, options_.engine);
    if (!hashed.ok()) return hashed.status();
    std::vector<Hash128> now = std::move(*hashed);
    MutexLock l(&mu_);
    counters_.bytes_hashed += bytes;
    ChangeSet cs = Full(bytes);
    const auto* base = gens_.Base(bytes, options_.max_layers);
    if (base != nullptr) {
      cs = Layered(base->version, base->depth, DiffChunks(base->state, now, options_.hash_chunk, bytes));
    }
    gens_.AddPending({.version = version, .depth = cs.depth, .bytes = bytes, .state = std::move(now)}, base);
    return Count(counters_, bytes, std::move(cs));
  }
  const char* name() const override { return "hash"; }
};

// Pages written since the base = what every result captured after the base
// collected (doomed ones too: their writes were never stored) plus what the
// tracker collects now; with the base the previous capture, just the latter.
class PagesDetector final : public BaselineDetector<ExtentList> {
 public:
  PagesDetector(const ChangeOptions& o, std::unique_ptr<PageSource> source)
      : BaselineDetector(o), source_(std::move(source)) {}

  Result<ChangeSet> DetectPieces(int64_t version, std::span<const RegionPiece> pieces) override {
    Result<uint64_t> size = CheckInput(pieces);
    if (!size.ok()) return size.status();
    const uint64_t bytes = *size;
    Result<ExtentList> collected = source_->Collect();
    MutexLock l(&mu_);
    lost_ = !collected.ok();
    if (lost_) {
      // Nothing is known about the writes before now: a full version, from
      // which the (re-armed) tracker counts again.
      gens_.Reset();
      gens_.AddPending({.version = version, .bytes = bytes}, nullptr);
      return Count(counters_, bytes, Full(bytes));
    }
    ExtentList changed = Clamp(*collected, bytes);
    ChangeSet cs = Full(bytes);
    const auto* base = gens_.Base(bytes, options_.max_layers);
    if (base != nullptr) {
      ExtentList since = changed;
      for (const auto& g : gens_.pending()) {
        if (g.seq > base->seq) since = UnionExtents(since, g.state);
      }
      cs = Layered(base->version, base->depth, std::move(since));
    }
    gens_.AddPending({.version = version, .depth = cs.depth, .bytes = bytes, .state = std::move(changed)}, base);
    return Count(counters_, bytes, std::move(cs));
  }
  // Monitoring deactivated (auto): the tracker stops, the next result is full.
  void Suspend() {
    source_->Suspend();
    Reset();
  }
  // Did the last Detect lose tracking?
  bool lost() const {
    MutexLock l(&mu_);
    return lost_;
  }
  const char* name() const override { return "pages"; }

 private:
  static ExtentList Clamp(const ExtentList& in, uint64_t bytes) {
    ExtentList out;
    for (const Extent& e : in) {
      if (e.offset >= bytes) break;
      AppendExtent(out, e.offset, std::min(e.end(), bytes) - e.offset);
    }
    return out;
  }

  const std::unique_ptr<PageSource> source_;
  bool lost_ CAIRN_GUARDED_BY(mu_) = false;
};

// `auto`: pages while the tracker works, else hash; and AI-Ckpt's
// "deactivate monitoring" (AutoPolicy). Detect runs on one thread at a time,
// so the policy state needs no lock except for counters().
class AutoDetector final : public ChangeDetector {
 public:
  AutoDetector(const ChangeOptions& o, std::unique_ptr<PageSource> source) : options_(o) {
    if (source) pages_ = std::make_unique<PagesDetector>(o, std::move(source));
  }

  Result<ChangeSet> DetectPieces(int64_t version, std::span<const RegionPiece> pieces) override {
    Result<uint64_t> size = CheckInput(pieces);
    if (!size.ok()) return size.status();
    const uint64_t bytes = *size;
    if (phase_ == Phase::kDeactivated && wait_left_ > 0) {
      --wait_left_;  // written full, nothing detected, nothing tracked
      MutexLock l(&mu_);
      return Count(counters_, bytes, Full(bytes));
    }
    if (phase_ == Phase::kDeactivated) {
      Inner().Reset();  // the re-check: this full version is the new baseline
      phase_ = Phase::kRecheck;
    }
    Result<ChangeSet> cs = Inner().DetectPieces(version, pieces);
    if (!cs.ok()) return cs.status();
    if (FellBack()) {
      // This version is full already; hashing it too makes it the baseline
      // of the next one, which can then be layered.
      hash_.Reset();
      CAIRN_RETURN_IF_ERROR(hash_.DetectPieces(version, pieces).status());
    }
    MutexLock l(&mu_);
    if (!cs->full) Judge(ExtentBytes(cs->changed), bytes);
    counters_.deactivated = phase_ == Phase::kDeactivated;
    return Count(counters_, bytes, std::move(*cs));
  }
  void Accept(int64_t version) override {
    if (pages_) pages_->Accept(version);
    hash_.Accept(version);
  }
  void Abandon(int64_t version) override {
    if (pages_) pages_->Abandon(version);
    hash_.Abandon(version);
  }
  void Reset() override {
    if (pages_) pages_->Reset();
    hash_.Reset();
  }
  ChangeCounters counters() const override {
    MutexLock l(&mu_);
    ChangeCounters c = counters_;
    c.bytes_hashed = hash_.counters().bytes_hashed;
    return c;
  }
  const char* name() const override {
    MutexLock l(&mu_);
    return pages_ && !use_hash_ ? "auto:pages" : "auto:hash";
  }

 private:
  enum class Phase { kActive, kDeactivated, kRecheck };

  // Did the page tracker just get lost? Then hash from now on.
  bool FellBack() {
    MutexLock l(&mu_);
    if (!pages_ || use_hash_ || !pages_->lost()) return false;
    use_hash_ = true;
    counters_.fallbacks += 1;
    pages_->Suspend();
    return true;
  }

  ChangeDetector& Inner() {
    MutexLock l(&mu_);
    if (pages_ && !use_hash_) return *pages_;
    return hash_;
  }

  // A layered result changed `changed` of `bytes`: keep, stop or resume
  // monitoring.
  void Judge(uint64_t changed, uint64_t bytes) CAIRN_REQUIRES(mu_) {
    const AutoPolicy& p = options_.policy;
    const bool high = bytes > 0 && static_cast<double>(changed) > p.high_fraction * static_cast<double>(bytes);
    if (phase_ == Phase::kRecheck) {
      wait_ = high ? std::min(2 * wait_, p.max_wait) : p.wait;
      if (high) Deactivate();
      else phase_ = Phase::kActive, high_run_ = 0;
      return;
    }
    high_run_ = high ? high_run_ + 1 : 0;
    if (high_run_ >= p.high_runs) {
      wait_ = p.wait;
      Deactivate();
    }
  }
  void Deactivate() CAIRN_REQUIRES(mu_) {
    phase_ = Phase::kDeactivated;
    wait_left_ = wait_;
    high_run_ = 0;
    counters_.deactivations += 1;
    if (pages_ && !use_hash_) pages_->Suspend();
  }

  const ChangeOptions options_;
  std::unique_ptr<PagesDetector> pages_;  // null: no tracker, hash only
  HashDetector hash_{options_};
  // Policy state: Detect's thread only (see the class comment).
  Phase phase_ = Phase::kActive;
  int high_run_ = 0;   // consecutive high results
  int wait_ = 0;       // captures to skip per deactivation (doubles)
  int wait_left_ = 0;  // of them, still to come
  mutable Mutex mu_;
  bool use_hash_ CAIRN_GUARDED_BY(mu_) = false;  // the tracker was lost
  ChangeCounters counters_ CAIRN_GUARDED_BY(mu_);
};

}  // namespace

Result<std::unique_ptr<ChangeDetector>> MakeChangeDetector(const ChangeOptions& o,
                                                           std::unique_ptr<PageSource> pages) {
  if (o.hash_chunk == 0) return Status::InvalidArgument("change detection: hash chunk of 0 bytes");
  switch (o.mode) {
    case ChangeDetection::kFull:
      return std::unique_ptr<ChangeDetector>(std::make_unique<FullDetector>());
    case ChangeDetection::kHash:
      return std::unique_ptr<ChangeDetector>(std::make_unique<HashDetector>(o));
    case ChangeDetection::kPages:
      if (!pages) {
        return Status::Unsupported(
            "checkpoint.changes = pages: this region has no page tracker (it is not page-aligned tracked "
            "memory, or userfaultfd write-protection is unavailable); use hash or auto");
      }
      return std::unique_ptr<ChangeDetector>(std::make_unique<PagesDetector>(o, std::move(pages)));
    case ChangeDetection::kAuto:
      return std::unique_ptr<ChangeDetector>(std::make_unique<AutoDetector>(o, std::move(pages)));
  }
  return Status::InvalidArgument("unknown change detection mode " + std::to_string(static_cast<int>(o.mode)));
}

}  // namespace cairn::core
