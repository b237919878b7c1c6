// Fast initialization of the host cache (docs/design.md, "Fast
// initialization"; HiPC'22 sections IV-A and IV-B).
//
// The cache is mapped at open without populating it. The initializer thread
// then prepares it in the background according to host_cache.init:
//   eager       nothing to do here: PrepareCache populated (and pinned) it
//   lazy        nothing to touch ahead of the writers; with pinning on, once
//               every chunk has been written, finishes the partly written
//               ones and pins
//   memset      memsets chunk after chunk, all the time
//   concurrent  faults pages in (os::TouchPages), chunk after chunk, all the
//               time
//   sequential  touches only while no capture, flush write or prefetch read is
//               moving memory
//   adaptive    TouchModel picks, before every chunk, between concurrent and
//               pausing while captures run (touch_model.hpp)
// Touching works on a chunk claimed from the cache (HostCache::ClaimForTouch),
// in slices of kSliceBytes, with mu_ dropped; a sequential touch stops at the
// end of the slice during which memory became busy and resumes there later.
//
// Pinning (host_cache.pin) waits until every chunk is touched: pinning
// untouched memory would fault it all in at once, inside the pin call (the
// slow path the strategies exist to avoid), and pinning piecewise would need
// one registration per piece. With pin_serialize the processes of the node
// take turns, first come first served, through a queue of lock files
// (os/node_lock.hpp).
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/pipeline.hpp"
#include "os/node_lock.hpp"
#include "util/clock.hpp"

namespace cairn::core {
namespace {

// Touch granularity: one transparent huge page. Small enough that a
// sequential touch yields within ~2 ms of a capture starting; large enough
// that a huge page is faulted in by one slice.
constexpr uint32_t kSliceBytes = 2u << 20;

}  // namespace

Status Pipeline::PrepareCache() {
  const auto t0 = std::chrono::steady_clock::now();
  const bool eager = config_.init == CacheInit::kEager;
  auto cache = HostCache::Create(config_.host_cache_bytes, static_cast<uint32_t>(config_.block_bytes),
                                 os::MapOptions{.populate = eager, .huge_pages = config_.huge_pages});
  if (!cache.ok()) return cache.status().WithContext("host cache");
  MutexLock lock(&mu_);
  cache_.emplace(std::move(cache).value());
  host_tier_.Attach(&*cache_);
  stats_.cache_capacity_bytes = cache_->capacity_bytes();
  stats_.init.strategy = config_.init;
  if (eager) {
    // The direct-pin baseline (what cudaMallocHost-style libraries do): the
    // application waits for the whole preparation, and processes pin in
    // parallel (no node lock).
    tracer_.Span("populate", "init", t0, std::chrono::steady_clock::now(), cache_->capacity_bytes());
    NoteTouchProgress();
    if (config_.pin) {
      uint8_t* const base = cache_->base();
      const size_t bytes = cache_->mapped_bytes();
      const auto p0 = std::chrono::steady_clock::now();
      Status pinned;
      {
        MutexUnlock unlocked(&mu_);  // the pin call (no thread runs yet)
        pinned = pinner_->Pin(base, bytes);
      }
      RecordPin(pinned, p0, std::chrono::steady_clock::now());
    }
  }
  stats_.init.open_s = SecondsSince(t0);
  return Status::Ok();
}

void Pipeline::RecordPin(const Status& s, std::chrono::steady_clock::time_point p0,
                         std::chrono::steady_clock::time_point p1) {
  stats_.init.pin_call_s = SecondsBetween(p0, p1);
  tracer_.Span("pin", "init", p0, p1, cache_->mapped_bytes());
  const bool registration = gpu_ && pinner_ == gpu_->host_pinner();
  // kExists from cuMemHostRegister: the application registered the range
  // already. It is page-locked and DMA-mapped all the same (and the pinner
  // leaves that registration alone at close).
  if (s.ok() || (registration && s.code() == Code::kExists)) {
    pinned_ = true;
    host_registered_ = registration;
    stats_.init.pinned_s = SecondsSince(opened_at_);
    return;
  }
  // Reported once, here and in Stats::init.pin_error; the cache keeps working
  // unpinned (slower DMA at worst, never wrong).
  stats_.init.pin_error = s.ToString();
  std::fprintf(stderr, "cairn: host cache left unpinned (%s): %s\n", pinner_->name(),
               s.ToString().c_str());
}

void Pipeline::NoteTouchProgress() {
  if (stats_.init.fully_touched_s < 0 && cache_->fully_touched()) {
    stats_.init.fully_touched_s = SecondsSince(opened_at_);
    tracer_.Instant("fully touched", "init", cache_->capacity_bytes(), "host cache");
    cv_init_.notify_all();
  }
}

void Pipeline::UseBandwidth(int delta, bool capture) {
  std::atomic<int>& users = capture ? captures_now_ : background_io_now_;
  if (users.fetch_add(delta, std::memory_order_relaxed) + delta == 0) cv_init_.notify_all();
}

bool Pipeline::MustPauseTouching(TouchModel::Mode mode) const {
  if (mode == TouchModel::Mode::kConcurrent) return false;
  const bool capturing = captures_now_.load(std::memory_order_relaxed) > 0;
  // The fixed sequential strategy also yields to flushes and prefetches (the
  // paper's definition); the adaptive one only to captures (touch_model.hpp).
  if (config_.init == CacheInit::kSequential) {
    return capturing || background_io_now_.load(std::memory_order_relaxed) > 0;
  }
  return capturing;
}

void Pipeline::NoteCaptureChunk(bool was_touched, uint64_t bytes) {
  if (pinned_) {
    stats_.init.capture_pinned_bytes += bytes;
  } else if (was_touched) {
    stats_.init.capture_touched_bytes += bytes;
  } else {
    stats_.init.capture_untouched_bytes += bytes;
  }
}

TouchModel::Mode Pipeline::TouchMode() {
  TouchModel::Mode mode = TouchModel::Mode::kConcurrent;
  switch (config_.init) {
    case CacheInit::kSequential: mode = TouchModel::Mode::kSequential; break;
    case CacheInit::kAdaptive:
      mode = touch_model_.Decide(touch_mode_);
      if (mode != touch_mode_) {
        ++stats_.init.mode_switches;
        tracer_.Instant(ModeName(mode), "init", 0, "touch mode");
      }
      break;
    default: break;
  }
  touch_mode_ = mode;
  stats_.init.concurrent_now = mode == TouchModel::Mode::kConcurrent;
  return mode;
}

void Pipeline::InitLoop(std::stop_token stop) {
  MutexLock lock(&mu_);
  if (config_.init == CacheInit::kEager) return;
  if (config_.init == CacheInit::kLazy) {
    // Lazy touches nothing ahead of the writers. Once every chunk has been
    // written at least once, what blocks shorter than a chunk left untouched
    // is finished below, so that the cache can be pinned.
    if (!config_.pin) return;
    cv_init_.wait(lock, stop, [&]() CAIRN_REQUIRES(mu_) { return cache_->all_visited(); });
  }
  while (!stop.stop_requested() && TouchNextChunk(stop)) {
  }
  if (!stop.stop_requested() && config_.pin && cache_->fully_touched()) PinCache(stop);
}

bool Pipeline::TouchNextChunk(std::stop_token stop) {
  if (cache_->fully_touched()) return false;
  const TouchModel::Mode mode = TouchMode();
  if (MustPauseTouching(mode)) {
    // Wait for the memory movers to end (re-deciding every few ms: the model
    // may change its mind meanwhile).
    cv_init_.wait_for(mu_, stop, std::chrono::milliseconds(5), [&] { return !MustPauseTouching(mode); });
    return true;
  }
  const std::optional<uint32_t> chunk = cache_->ClaimForTouch();
  if (!chunk) {
    // What is left untouched is the tail of chunks in use (a block shorter
    // than a chunk): wait for one to be freed.
    cv_init_.wait_for(mu_, stop, std::chrono::milliseconds(5),
                      [&]() CAIRN_REQUIRES(mu_) { return cache_->fully_touched(); });
    return true;
  }
  const uint32_t chunk_bytes = cache_->chunk_bytes();
  uint32_t progress = cache_->touch_progress(*chunk);
  uint8_t* const base = cache_->data(*chunk);
  const bool use_memset = config_.init == CacheInit::kMemset;

  struct Sample {
    uint32_t bytes;
    double seconds;
    bool during_capture;
  };
  std::vector<Sample> samples;
  const auto t0 = std::chrono::steady_clock::now();
  mu_.Unlock();  // the touching (memset or page faults)
  touching_.store(true, std::memory_order_relaxed);
  while (progress < chunk_bytes && !stop.stop_requested()) {
    const uint32_t n = std::min(kSliceBytes, chunk_bytes - progress);
    const bool capture_before = captures_now_.load(std::memory_order_relaxed) > 0;
    const auto s0 = std::chrono::steady_clock::now();
    if (use_memset) {
      std::memset(base + progress, 0, n);
    } else {
      os::TouchPages(base + progress, n);
    }
    const bool capture_after = captures_now_.load(std::memory_order_relaxed) > 0;
    samples.push_back({n, SecondsSince(s0), capture_before || capture_after});
    progress += n;
    if (MustPauseTouching(mode)) break;  // yield to the capture (or flush)
  }
  touching_.store(false, std::memory_order_relaxed);
  mu_.Lock();
  cache_->ReleaseClaim(*chunk, progress);
  uint64_t touched = 0;
  for (const Sample& s : samples) {
    touch_model_.OnTouch(s.bytes, s.seconds, s.during_capture);
    touched += s.bytes;
  }
  stats_.init.touched_bytes += touched;
  stats_.init.touch_slices += samples.size();
  tracer_.Span(use_memset ? "memset" : "touch", "init", t0, std::chrono::steady_clock::now(), touched);
  NoteTouchProgress();
  cv_app_.notify_all();  // a capture waiting for space may take this chunk now
  prefetcher_.Wake();
  return true;
}

void Pipeline::PinCache(std::stop_token stop) {
  uint8_t* const base = cache_->base();
  const size_t bytes = cache_->mapped_bytes();
  mu_.Unlock();  // the node lock and the pin call
  const auto w0 = std::chrono::steady_clock::now();
  os::NodeLock node_lock;
  Status s;
  if (config_.pin_serialize) {
    const std::string path = config_.pin_lock_path.empty() ? os::DefaultPinLockPath() : config_.pin_lock_path;
    auto acquired = os::NodeLock::Acquire(path, [&] { return stop.stop_requested(); });
    if (acquired.ok()) {
      node_lock = std::move(acquired).value();
    } else {
      s = acquired.status();
    }
  }
  const auto p0 = std::chrono::steady_clock::now();
  if (s.ok()) s = pinner_->Pin(base, bytes);
  const auto p1 = std::chrono::steady_clock::now();
  node_lock.Release();  // the next process of the node may pin now
  mu_.Lock();
  stats_.init.pin_wait_s = SecondsBetween(w0, p0);
  if (stop.stop_requested() && !s.ok()) return;  // gave up waiting: closing, not a failure
  if (config_.pin_serialize) tracer_.Span("wait: node pin lock", "init", w0, p0, 0);
  RecordPin(s, p0, p1);
}

}  // namespace cairn::core
