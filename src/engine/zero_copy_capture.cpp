// The pipeline's zero-copy epochs (zero_copy_capture.hpp).
#include "engine/zero_copy_capture.hpp"

#include <algorithm>
#include <functional>

#include "os/mem/mappings.hpp"
#include "os/mem/memory.hpp"

namespace cairn::core {
namespace {

constexpr uint64_t kMaxWatchGroupBytes = 2ull << 20;  // a huge page

// What an epoch protects and what it copies at the call.
struct EpochPlan {
  std::vector<ZeroCopyRange> ranges;
  std::vector<ZeroCopyPiece> copied;
};

// Each non-empty host region with the extents it stores. A region that is
// not page-aligned (a Python or torch allocation: 16 or 64 bytes aligned)
// is protected from its first whole page to its last, and the partial pages
// at its ends are copied; one stored in part (layered) and not aligned has
// its stored bytes copied, since its extents would not fall on its pages.
Result<EpochPlan> PlanEpoch(const format::Layout& l, const std::vector<CaptureSource>& sources) {
  const uintptr_t page = os::PageSize();
  EpochPlan plan;
  for (uint32_t r = 0; r < l.regions.size(); ++r) {
    const auto& region = l.regions[r];
    if (region.spec.memory != MemoryKind::kHost) {
      return Status::Unsupported("region " + std::to_string(region.spec.id) +
                                 " is not host memory");
    }
    if (region.spec.bytes == 0 || region.stored_bytes == 0) continue;
    auto* data = static_cast<uint8_t*>(const_cast<void*>(sources[r].data));
    const auto start = reinterpret_cast<uintptr_t>(data);
    const uintptr_t end = start + region.spec.bytes;
    const uintptr_t lo = (start + page - 1) / page * page, hi = end / page * page;
    const Extent* x = l.region_extents(r);
    const bool aligned = lo == start && hi == end;
    if (aligned || (region.stored_bytes == region.spec.bytes && lo < hi)) {
      ZeroCopyRange z{.data = reinterpret_cast<uint8_t*>(lo), .bytes = hi - lo};
      if (aligned) z.extents.assign(x, x + region.extent_count);
      plan.ranges.push_back(std::move(z));
      plan.copied.push_back({data, lo - start});
      plan.copied.push_back({reinterpret_cast<const uint8_t*>(hi), end - hi});
      continue;
    }
    for (uint32_t k = 0; k < region.extent_count; ++k)
      plan.copied.push_back({data + x[k].offset, x[k].bytes});
  }
  return plan;
}

// A `pages` region's written pages, from the zero-copy engine's watch. The
// watch covers writes since the last epoch's Begin, so it answers for this
// region's checkpoint name only if that epoch is the one begun right after
// this source's previous Collect (another name's checkpoint, or a copied one,
// in between: nothing is known, the version is full).
class ZeroCopyPageSource final : public PageSource {
 public:
  // The written extents, and through *epochs the epochs begun so far.
  using Fn = std::function<Result<ExtentList>(uint64_t* epochs)>;
  explicit ZeroCopyPageSource(Fn fn) : fn_(std::move(fn)) {}
  // Called by Plan before the epoch's Begin; an error makes the version full.
  Result<ExtentList> Collect() override {
    uint64_t epochs = 0;
    Result<ExtentList> r = fn_(&epochs);
    const uint64_t expect = next_;
    next_ = epochs + 1;  // the epoch this version's capture begins
    if (r.ok() && epochs != expect) {
      return Status::Unsupported(
          "zero-copy: the watched epoch is not this checkpoint's previous one");
    }
    return r;
  }

 private:
  const Fn fn_;
  uint64_t next_ = 0;  // the capture thread's (Plan)
};

}  // namespace

// The learned order watches first writes between checkpoints too. It
// orders blocks, so it watches a block (at most a 2 MiB huge page) at a
// time: one fault per block. checkpoint.changes = pages / auto learns the
// written pages from the watch (ZeroCopyPageSource), so it watches page by
// page, as the page tracker would.
Status ZeroCopyCapture::MakeEngine() {
  if (engine_) return Status::Ok();
  const bool pages =
      config_.changes == ChangeDetection::kPages || config_.changes == ChangeDetection::kAuto;
  const size_t group =
      pages ? 1 : std::min<uint64_t>(config_.block_bytes, kMaxWatchGroupBytes) / os::PageSize();
  const bool learned = config_.zero_copy_order == "learned";
  auto z = ZeroCopy::Create(config_.cow_fraction, config_.write_protect, learned, group, learned);
  if (!z.ok()) {
    unavailable_ = z.status();
    return z.status();
  }
  engine_ = std::move(z).value();
  if (!engine_->wp_note().empty()) {
    stats_->note = "write protection by mprotect + SIGSEGV (" + engine_->wp_note() + ")";
  }
  return Status::Ok();
}

bool ZeroCopyCapture::Begin(const format::Layout& l, const std::vector<CaptureSource>& sources,
                            const std::string& name, int64_t number, SteadyTime t0) {
  mu_->AssertHeld();
  capture_mu_->AssertHeld();
  Status s = [&]() CAIRN_REQUIRES(*mu_) -> Status {
    CAIRN_RETURN_IF_ERROR(unavailable_);
    CAIRN_ASSIGN_OR_RETURN(EpochPlan plan, PlanEpoch(l, sources));
    CAIRN_RETURN_IF_ERROR(MakeEngine());
    return engine_->Begin(plan.ranges, plan.copied);
  }();
  if (!s.ok()) {
    stats_->fallbacks += 1;
    if (stats_->fallbacks == 1) {  // the first copy says why (after the mechanism's note, if any)
      stats_->note += (stats_->note.empty() ? "" : "; ") + std::string("checkpoint '") + name +
                      "' " + std::to_string(number) + " was copied, not zero-copy: " + s.message();
    }
    return false;
  }
  stats_->versions += 1;
  stats_->call_s += SecondsSince(t0);
  return true;
}

void ZeroCopyCapture::EndEpoch() {
  mu_->AssertHeld();
  engine_->End();  // whatever was not read (an error) is released too
}

void ZeroCopyCapture::EndRead() {
  mu_->AssertHeld();
  busy_ = false;
  idle_->notify_all();
}

void ZeroCopyCapture::UsePageSources(Layering& layering) {
  layering.SetPageSources([this](const void* data, uint64_t bytes) -> std::unique_ptr<PageSource> {
    return std::make_unique<ZeroCopyPageSource>(
        [this, data, bytes](uint64_t* epochs) { return Written(data, bytes, epochs); });
  });
}

// Plan runs after the last epoch's reader was joined (capture_mu), so only
// the watch's handler runs beside it.
Result<ExtentList> ZeroCopyCapture::Written(const void* data, uint64_t bytes, uint64_t* epochs) {
  MutexLock lock(mu_);
  *epochs = engine_ ? engine_->counters().epochs : 0;
  if (!engine_) return Status::Unsupported("zero-copy: no epoch yet");
  return engine_->Written(data, bytes);
}

// After the epoch, on the reader thread, once the capture is over (a
// checkpoint waiting for it asks it to stop: Join): the epoch split the huge
// pages of the memory it protected (os/mem/mappings.hpp), which makes the
// next checkpoint call's protection ~80x dearer. Not while a watch keeps
// pages protected (those spans could not be collapsed anyway).
void ZeroCopyCapture::RestoreHugePages(const format::Layout& l,
                                       const std::vector<CaptureSource>& sources,
                                       const std::stop_token& stop) {
  {
    MutexLock lock(mu_);
    if (!engine_ || engine_->watching()) return;
  }
  size_t bytes = 0;
  for (uint32_t r = 0; r < l.regions.size() && !stop.stop_requested(); ++r) {
    if (l.regions[r].spec.memory != MemoryKind::kHost || l.regions[r].stored_bytes == 0) continue;
    bytes += os::RestoreHugePages(sources[r].data, l.regions[r].spec.bytes,
                                  [&] { return stop.stop_requested(); });
  }
  MutexLock lock(mu_);
  stats_->huge_restored_bytes += bytes;
}

void ZeroCopyCapture::Join() {
  capture_mu_->AssertHeld();
  if (!reader_.joinable()) return;
  reader_.request_stop();  // a huge-page pass in progress ends at its span
  reader_.join();
}

void ZeroCopyCapture::WaitIdle() {
  MutexLock lock(mu_);
  idle_->wait(lock, [&]() CAIRN_REQUIRES(*mu_) { return !busy_; });
  // A restore or pop writes into memory the last epoch may still watch (and
  // read(2) into it would fail with a user-mode-only userfaultfd): the watch
  // ends, the next epoch's order keeps what it saw so far.
  if (engine_) engine_->StopWatching();
}

void ZeroCopyCapture::AddCounters(ZeroCopyStats* s) const {
  mu_->AssertHeld();
  if (!engine_) return;
  const ZeroCopyCounters c = engine_->counters();
  s->protected_bytes = c.protected_bytes;
  s->cow_peak_bytes = c.cow_peak_bytes;
  s->red = c.red;
  s->orange = c.orange;
  s->green = c.green;
  s->blue = c.blue;
  s->watch_faults = c.watch_faults;
  s->faults = c.faults;
  s->red_wait_s = c.red_wait_s;
  s->fault_s = c.fault_s;
}

}  // namespace cairn::core
