// Fast initialization of the host cache (docs/design.md, "Fast
// initialization"; HiPC'22 sections IV-A and IV-B).
//
// The cache is mapped at open without populating it. The initializer thread
// then prepares it in the background according to host_cache.init:
//   eager       nothing to do here: Prepare populated (and pinned) it
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
// in slices of kSliceBytes, with *mu_ dropped; a sequential touch stops at the
// end of the slice during which memory became busy and resumes there later.
//
// Pinning (host_cache.pin) waits until every chunk is touched: pinning
// untouched memory would fault it all in at once, inside the pin call (the
// slow path the strategies exist to avoid), and pinning piecewise would need
// one registration per piece. With pin_serialize the processes of the node
// take turns, first come first served, through a queue of lock files
// (os/fs/node_lock.hpp).
#include "engine/stages/initializer.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "os/fs/node_lock.hpp"
#include "util/clock.hpp"
#include "util/log.hpp"

namespace cairn::core {
namespace {

// Touch granularity: one transparent huge page. Small enough that a
// sequential touch yields within ~2 ms of a capture starting; large enough
// that a huge page is faulted in by one slice.
constexpr uint32_t kSliceBytes = 2u << 20;

}  // namespace

os::Numa* CacheNuma(const Config& config) {
  if (config.host_cache_numa == "off") return nullptr;
  os::Numa* numa = config.numa != nullptr ? config.numa : &os::RealNuma();
  if (config.host_cache_numa == "auto" && numa->topology().nodes() < 2) return nullptr;
  return numa;
}

Initializer::Initializer(Mutex* mu, std::condition_variable_any* progress, Tracer* tracer,
                         const Config& config, BlockStore* store, MemoryMovers* movers,
                         Owner* owner)
    : mu_(mu),
      progress_(progress),
      tracer_(tracer),
      config_(config),
      store_(store),
      owner_(owner),
      pinner_(config.pinner ? config.pinner : os::MemoryPinner::Mlock()),
      movers_(movers),
      cv_(movers->changed()) {}

void Initializer::UseRegistrationPinner(os::MemoryPinner* pinner) {
  pinner_ = pinner;
  registration_ = true;
}

Status Initializer::Prepare() {
  const auto t0 = std::chrono::steady_clock::now();
  const bool eager = config_.init == CacheInit::kEager;
  const os::MapOptions map{.populate = eager, .huge_pages = config_.huge_pages};
  const auto block = static_cast<uint32_t>(config_.block_bytes);
  os::Numa* const numa = CacheNuma(config_);
  // Growth reserves address space for up to half the machine's RAM; a pinned
  // or populated cache keeps its size (it is pinned or populated as one).
  const bool grows = config_.host_cache_grow && !config_.pin && !eager;
  const uint64_t reserve = grows ? os::PhysicalMemoryBytes() / 2 : 0;
  auto mapped = HostCache::Create(config_.host_cache_bytes, block, map, numa, reserve);
  // Under `auto` the binding is advisory: a topology the kernel disagrees
  // with (HWLOC_XMLFILE naming another machine) leaves the cache unbound;
  // `on` reports the mbind error.
  if (!mapped.ok() && numa != nullptr && config_.host_cache_numa == "auto") {
    mapped = HostCache::Create(config_.host_cache_bytes, block, map, nullptr, reserve);
  }
  if (!mapped.ok()) return mapped.status().WithContext("host cache");
  MutexLock lock(mu_);
  store_->Adopt(std::move(mapped).value());
  stats_.strategy = config_.init;
  if (eager) PrepareEager(t0);
  stats_.open_s = SecondsSince(t0);
  return Status::Ok();
}

// The direct-pin baseline (what cudaMallocHost-style libraries do): the
// application waits for the whole preparation, and processes pin in
// parallel (no node lock).
void Initializer::PrepareEager(TimePoint t0) {
  tracer_->Span("populate", "init", t0, std::chrono::steady_clock::now(), cache().capacity_bytes());
  NoteFullyTouched();
  if (!config_.pin) return;
  uint8_t* const base = cache().base();
  const size_t bytes = cache().mapped_bytes();
  const auto p0 = std::chrono::steady_clock::now();
  Status pinned;
  {
    MutexUnlock unlocked(mu_);  // the pin call (no thread runs yet)
    pinned = pinner_->Pin(base, bytes);
  }
  RecordPin(pinned, p0, std::chrono::steady_clock::now());
}

void Initializer::Start(const char* name) {
  thread_ = std::jthread([this, name](std::stop_token stop) {
    if (name != nullptr) tracer_->NameThread(name);
    Loop(stop);
  });
}

void Initializer::Stop() {
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
}

void Initializer::Unpin(const HostCache& cache) {
  bool pinned = false;
  {
    MutexLock lock(mu_);
    pinned = std::exchange(pinned_, false);
  }
  // munlock/unregister are system calls: not under the lock.
  if (pinned) pinner_->Unpin(cache.base(), cache.mapped_bytes());
}

void Initializer::RecordPin(const Status& s, TimePoint p0, TimePoint p1) {
  stats_.pin_call_s = SecondsBetween(p0, p1);
  tracer_->Span("pin", "init", p0, p1, cache().mapped_bytes());
  // kExists from cuMemHostRegister: the application registered the range
  // already. It is page-locked and DMA-mapped all the same (and the pinner
  // leaves that registration alone at close).
  if (s.ok() || (registration_ && s.code() == Code::kExists)) {
    pinned_ = true;
    store_->SetHostRegistered(registration_);
    stats_.pinned_s = SecondsSince(opened_at_);
    return;
  }
  // Reported once, here and in Stats::init.pin_error; the cache keeps working
  // unpinned (slower DMA at worst, never wrong).
  stats_.pin_error = s.ToString();
  util::Log(LogLevel::kWarn, "host cache left unpinned (%s): %s", pinner_->name(),
            s.ToString().c_str());
}

void Initializer::NoteTouchProgress() {
  mu_->AssertHeld();
  NoteFullyTouched();
}

uint32_t Initializer::GrowFor(uint64_t bytes) {
  mu_->AssertHeld();
  HostCache& c = cache();
  const uint64_t block = c.chunk_bytes();
  const uint64_t want = (bytes + block - 1) / block + 1;  // the blocks, and one more
  if (want <= c.chunk_count() || c.reserved_count() <= c.chunk_count()) return 0;
  const uint64_t room = os::AvailableMemoryBytes() / 2 / block;
  const uint32_t added =
      c.Grow(static_cast<uint32_t>(std::min<uint64_t>(want, c.chunk_count() + room)));
  if (added == 0) return 0;
  stats_.fully_touched_s = -1;  // fully touched again once the new chunks are
  tracer_->Instant("grown", "init", c.capacity_bytes(), "host cache");
  cv_.notify_all();
  return added;
}

void Initializer::NoteFullyTouched() {
  if (stats_.fully_touched_s < 0 && cache().fully_touched()) {
    stats_.fully_touched_s = SecondsSince(opened_at_);
    tracer_->Instant("fully touched", "init", cache().capacity_bytes(), "host cache");
    cv_.notify_all();
  }
}

const InitStats& Initializer::stats() const {
  mu_->AssertHeld();
  return stats_;
}

bool Initializer::MustPauseTouching(TouchModel::Mode mode) const {
  // A restore from files blocks the application at the disk's speed and
  // reads straight into the application's memory, not into the cache: a
  // touch then only takes CPU and page-fault time from the reads (a cold
  // restart of 1 GiB measured 0.97-1.40 s touching vs 0.77-0.83 s without,
  // docs/bench.md). Only the fixed concurrent strategy, which the user chose
  // to touch alongside everything, keeps going.
  if (config_.init != CacheInit::kConcurrent && movers_->now(MemoryMovers::Kind::kRestore) > 0) {
    return true;
  }
  if (mode == TouchModel::Mode::kConcurrent) return false;
  const bool capturing = movers_->now(MemoryMovers::Kind::kCapture) > 0;
  // The fixed sequential strategy also yields to flushes and prefetches (the
  // paper's definition); the adaptive one only to captures (touch_model.hpp).
  if (config_.init == CacheInit::kSequential) {
    return capturing || movers_->now(MemoryMovers::Kind::kBackgroundIo) > 0;
  }
  return capturing;
}

// ---------------------------------------------------------------------------
// The capture path

double Initializer::CaptureStarted(TimePoint t0) {
  mu_->AssertHeld();
  // The compute interval that ended at t0 feeds the adaptive touch model.
  const double interval_s = last_capture_end_ ? SecondsBetween(*last_capture_end_, t0) : -1;
  movers_->Add(MemoryMovers::Kind::kCapture, +1);
  return interval_s;
}

bool Initializer::TouchingAllowed() const {
  mu_->AssertHeld();
  return touch_mode_ == TouchModel::Mode::kConcurrent;
}

void Initializer::NoteCaptureChunk(bool was_touched, uint64_t bytes) {
  mu_->AssertHeld();
  if (pinned_) {
    stats_.capture_pinned_bytes += bytes;
  } else if (was_touched) {
    stats_.capture_touched_bytes += bytes;
  } else {
    stats_.capture_untouched_bytes += bytes;
  }
}

void Initializer::NoteCaptureCopy(uint64_t bytes, double seconds, bool into_touched,
                                  bool touching) {
  mu_->AssertHeld();
  touch_model_.OnCaptureCopy(bytes, seconds, into_touched, touching);
}

void Initializer::CaptureEnded(uint64_t bytes, double seconds, double interval_s) {
  mu_->AssertHeld();
  touch_model_.OnCapture(bytes, seconds, interval_s, touch_mode_ == TouchModel::Mode::kConcurrent);
  last_capture_end_ = std::chrono::steady_clock::now();
  movers_->Add(MemoryMovers::Kind::kCapture, -1);
}

// ---------------------------------------------------------------------------
// The thread

TouchModel::Mode Initializer::TouchMode() {
  TouchModel::Mode mode = TouchModel::Mode::kConcurrent;
  switch (config_.init) {
    case CacheInit::kSequential:
      mode = TouchModel::Mode::kSequential;
      break;
    case CacheInit::kAdaptive:
      mode = touch_model_.Decide(touch_mode_);
      if (mode != touch_mode_) {
        ++stats_.mode_switches;
        tracer_->Instant(ModeName(mode), "init", 0, "touch mode");
      }
      break;
    default:
      break;
  }
  touch_mode_ = mode;
  stats_.concurrent_now = mode == TouchModel::Mode::kConcurrent;
  return mode;
}

void Initializer::Loop(std::stop_token stop) {
  MutexLock lock(mu_);
  if (config_.init == CacheInit::kEager) return;
  if (config_.init == CacheInit::kLazy) {
    // Lazy touches nothing ahead of the writers. Once every chunk has been
    // written at least once, what blocks shorter than a chunk left untouched
    // is finished below, so that the cache can be pinned.
    if (!config_.pin) return;
    cv_.wait(lock, stop, [&]() CAIRN_REQUIRES(*mu_) { return cache().all_visited(); });
  }
  while (!stop.stop_requested()) {
    while (!stop.stop_requested() && TouchNextChunk(stop)) {
    }
    if (stop.stop_requested()) return;
    if (config_.pin) {
      if (cache().fully_touched()) PinCache(stop);
      return;
    }
    // Touched: sleep until the cache grows (GrowFor) or the client closes.
    if (cache().reserved_count() == cache().chunk_count()) return;
    cv_.wait(lock, stop, [&]() CAIRN_REQUIRES(*mu_) { return !cache().fully_touched(); });
  }
}

bool Initializer::TouchNextChunk(std::stop_token stop) {
  if (cache().fully_touched()) return false;
  const TouchModel::Mode mode = TouchMode();
  if (MustPauseTouching(mode)) {
    // Wait for the memory movers to end (re-deciding every few ms: the model
    // may change its mind meanwhile).
    cv_.wait_for(*mu_, stop, std::chrono::milliseconds(5),
                 [&] { return !MustPauseTouching(mode); });
    return true;
  }
  const std::optional<uint32_t> chunk = cache().ClaimForTouch();
  if (!chunk) {
    // What is left untouched is the tail of chunks in use (a block shorter
    // than a chunk): wait for one to be freed.
    cv_.wait_for(*mu_, stop, std::chrono::milliseconds(5),
                 [&]() CAIRN_REQUIRES(*mu_) { return cache().fully_touched(); });
    return true;
  }
  TouchClaimed(*chunk, mode, stop);
  return true;
}

void Initializer::TouchSlice(uint8_t* p, uint32_t n) {
  if (owner_->TouchSlice(p, n)) return;
  if (config_.init == CacheInit::kMemset) {
    std::memset(p, 0, n);
  } else {
    os::TouchPages(p, n);
  }
}

void Initializer::TouchClaimed(uint32_t chunk, TouchModel::Mode mode, std::stop_token stop) {
  const uint32_t chunk_bytes = cache().chunk_bytes();
  uint32_t progress = cache().touch_progress(chunk);
  uint8_t* const base = cache().data(chunk);
  std::vector<Slice> slices;
  const auto t0 = std::chrono::steady_clock::now();
  {
    MutexUnlock unlocked(mu_);  // the touching (memset or page faults)
    touching_.store(true, std::memory_order_relaxed);
    while (progress < chunk_bytes && !stop.stop_requested()) {
      const uint32_t n = std::min(kSliceBytes, chunk_bytes - progress);
      const bool capture_before = movers_->now(MemoryMovers::Kind::kCapture) > 0;
      const auto s0 = std::chrono::steady_clock::now();
      TouchSlice(base + progress, n);
      const bool capture_after = movers_->now(MemoryMovers::Kind::kCapture) > 0;
      slices.push_back({n, SecondsSince(s0), capture_before || capture_after});
      progress += n;
      if (MustPauseTouching(mode)) break;  // yield to the capture (or flush)
    }
    touching_.store(false, std::memory_order_relaxed);
  }
  cache().ReleaseClaim(chunk, progress);
  BookTouch(slices, t0);
}

void Initializer::BookTouch(const std::vector<Slice>& slices, TimePoint t0) {
  uint64_t touched = 0;
  for (const Slice& s : slices) {
    touch_model_.OnTouch(s.bytes, s.seconds, s.during_capture);
    touched += s.bytes;
  }
  stats_.touched_bytes += touched;
  stats_.touch_slices += slices.size();
  tracer_->Span(config_.init == CacheInit::kMemset ? "memset" : "touch", "init", t0,
                std::chrono::steady_clock::now(), touched);
  NoteFullyTouched();
  progress_->notify_all();  // a capture waiting for space may take this chunk now
  owner_->Touched();
}

void Initializer::PinCache(std::stop_token stop) {
  uint8_t* const base = cache().base();
  const size_t bytes = cache().mapped_bytes();
  os::NodeLock node_lock;
  Status s;
  TimePoint w0, p0, p1;
  {
    MutexUnlock unlocked(mu_);  // the node lock and the pin call
    w0 = std::chrono::steady_clock::now();
    if (config_.pin_serialize) {
      const std::string path =
          config_.pin_lock_path.empty() ? os::DefaultPinLockPath() : config_.pin_lock_path;
      auto acquired = os::NodeLock::Acquire(path, [&] { return stop.stop_requested(); });
      if (acquired.ok()) {
        node_lock = std::move(acquired).value();
      } else {
        s = acquired.status();
      }
    }
    p0 = std::chrono::steady_clock::now();
    if (s.ok()) s = pinner_->Pin(base, bytes);
    p1 = std::chrono::steady_clock::now();
    node_lock.Release();  // the next process of the node may pin now
  }
  stats_.pin_wait_s = SecondsBetween(w0, p0);
  if (stop.stop_requested() && !s.ok()) return;  // gave up waiting: closing, not a failure
  if (config_.pin_serialize) tracer_->Span("wait: node pin lock", "init", w0, p0, 0);
  RecordPin(s, p0, p1);
  progress_->notify_all();
}

}  // namespace cairn::core
