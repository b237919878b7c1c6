// Fast initialization of the host cache (docs/design.md, "Fast
// initialization"; HiPC'22 sections IV-A and IV-B): it maps the cache at open
// (populated only for the eager strategy), touches it in the background ahead
// of the captures, then pins it once, node-serialized. initializer.cpp says
// what each host_cache.init strategy does.
//
// It owns its thread, the touch model, the init stats, the pinner and the pin
// state, and the counters of memory movers (captures, flush writes, prefetch
// reads and drains) that sequential touching yields to. The host cache itself
// belongs to its owner (the pipeline: the captures allocate from it), reached
// through the narrow Owner interface below, so a test drives it with a small
// cache of its own and a fake pinner.
//
// Locking: it shares its owner's mutex (*mu), which guards the cache and the
// state below. Every lock-held step requires *mu; touching a claimed chunk,
// the node lock and the pin call run with *mu dropped. The mover counters are
// atomics (no lock needed). The public methods marked "*mu held" assert it
// (the owner's annotation names its own mutex, which Clang cannot match).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <optional>
#include <stop_token>
#include <thread>
#include <vector>

#include "cairn/cairn.hpp"
#include "engine/block_store.hpp"
#include "engine/memory_movers.hpp"
#include "engine/trace.hpp"
#include "models/touch_model.hpp"
#include "os/mem/memory.hpp"
#include "os/mem/numa.hpp"
#include "tiers/host_cache.hpp"
#include "util/mutex.hpp"
#include "util/thread_annotations.hpp"

namespace cairn::core {

// host_cache.numa: the layer the host cache's chunks are bound to nodes
// through (config.numa, else the real one), or null: `off`, or `auto` on a
// machine of one node (then nothing is bound and nothing costs).
os::Numa* CacheNuma(const Config& config);

class Initializer {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // What it needs of its owner (the pipeline: stage_owners.hpp).
  class Owner {
   public:
    // With *mu held: a chunk came back from touching, so a capture or
    // prefetch waiting for room may take it now (`progress` is notified too).
    virtual void Touched() = 0;
    // WITHOUT *mu: touches one slice of a claimed chunk and returns true, or
    // returns false and the initializer touches it (memset under the memset
    // strategy, else os::TouchPages). Tests gate here.
    virtual bool TouchSlice(uint8_t* /*p*/, uint32_t /*n*/) { return false; }

   protected:
    ~Owner() = default;
  };

  // config: host_cache.* (size, block size, init, huge pages, pin, pin
  // serialization, pinner). progress: notified (under *mu) after every
  // touched chunk and after the pin. tracer: thread-safe on its own.
  // store: where Prepare puts the cache it mapped (BlockStore::Adopt); the
  // chunks it touches and pins are the store's from then on.
  // movers: who moves memory now (memory_movers.hpp). Touching pauses while
  // they do, as MustPauseTouching says: for a restore from files under every
  // strategy but the fixed concurrent one, for a capture unless the touch
  // mode is concurrent, for background I/O under the sequential strategy
  // only; the thread waits on movers->changed().
  Initializer(Mutex* mu, std::condition_variable_any* progress, Tracer* tracer,
              const Config& config, BlockStore* store, MemoryMovers* movers, Owner* owner);
  ~Initializer() { Stop(); }
  Initializer(const Initializer&) = delete;
  Initializer& operator=(const Initializer&) = delete;

  // Before Prepare, when the owner pins through the GPU driver
  // (cuMemHostRegister): kExists from it counts as pinned, and the store's
  // host_registered() tells.
  void UseRegistrationPinner(os::MemoryPinner* pinner);
  // At open, before Start: maps the cache and hands it to the owner; eager:
  // populated, and pinned here (the application waits for it).
  Status Prepare() CAIRN_EXCLUDES(*mu_);
  // Starts the thread (`name`: its name in the tracer's timeline).
  void Start(const char* name = nullptr);
  void RequestStop() { thread_.request_stop(); }
  void Stop();  // joins; a pin call already running is waited for
  // After Stop, with the cache the owner's alone: undoes the pin, if any.
  void Unpin(const HostCache& cache) CAIRN_EXCLUDES(*mu_);

  // The thread is touching right now (a capture's copy rates tell apart).
  bool touching() const { return touching_.load(std::memory_order_relaxed); }

  // The capture path (precondition, all below: *mu held).
  // A capture starts at t0: counted as moving memory; returns the compute
  // interval since the previous capture ended (< 0: the first).
  double CaptureStarted(TimePoint t0);
  // Whether the touch mode in use lets touching run during captures.
  bool TouchingAllowed() const;
  // Books a captured block's bytes by the state of its chunk.
  void NoteCaptureChunk(bool was_touched, uint64_t bytes);
  // Copies of a batch into touched (or untouched) chunks, and whether
  // touching ran meanwhile: the touch model's capture rates.
  void NoteCaptureCopy(uint64_t bytes, double seconds, bool into_touched, bool touching);
  // A capture of `bytes` ended after `seconds` (interval_s: what
  // CaptureStarted returned). A rolled-back capture ends its mover
  // (MemoryMovers::kCapture) instead.
  void CaptureEnded(uint64_t bytes, double seconds, double interval_s);
  // A writer took a chunk (its write touches it): the cache may be fully
  // touched now.
  void NoteTouchProgress();
  // host_cache.grow: makes the cache hold `bytes` (one version's blocks) and
  // one block more, within its reservation and within half of the memory the
  // machine has available now; the thread touches the new chunks. Returns
  // the chunks added (0: large enough, growth off, or no room).
  uint32_t GrowFor(uint64_t bytes);
  const InitStats& stats() const;

 private:
  struct Slice {  // one touched slice, for the touch model
    uint32_t bytes;
    double seconds;
    bool during_capture;
  };

  HostCache& cache() CAIRN_REQUIRES(*mu_) { return store_->cache(); }
  // Eager: books the populated cache and pins it (the application waits).
  void PrepareEager(TimePoint t0) CAIRN_REQUIRES(*mu_);
  void Loop(std::stop_token stop) CAIRN_EXCLUDES(*mu_);
  // Touches (part of) one claimed chunk with the lock dropped; false when
  // nothing is left to touch.
  bool TouchNextChunk(std::stop_token stop) CAIRN_REQUIRES(*mu_);
  // Touches the claimed chunk from its progress on, slice by slice, with *mu
  // dropped, until it is done, stop is asked or `mode` must pause.
  void TouchClaimed(uint32_t chunk, TouchModel::Mode mode, std::stop_token stop)
      CAIRN_REQUIRES(*mu_);
  void TouchSlice(uint8_t* p, uint32_t n);  // no lock
  // Books the slices touched of a chunk (started at t0).
  void BookTouch(const std::vector<Slice>& slices, TimePoint t0) CAIRN_REQUIRES(*mu_);
  void PinCache(std::stop_token stop) CAIRN_REQUIRES(*mu_);
  // Books a pin call that ran from p0 to p1 (stats, trace) and its result:
  // pinned, or the error reported once.
  void RecordPin(const Status& s, TimePoint p0, TimePoint p1) CAIRN_REQUIRES(*mu_);
  void NoteFullyTouched() CAIRN_REQUIRES(*mu_);
  TouchModel::Mode TouchMode() CAIRN_REQUIRES(*mu_);
  // Whether touching in `mode` must pause now (reads the atomic counters).
  bool MustPauseTouching(TouchModel::Mode mode) const;

  Mutex* const mu_;
  std::condition_variable_any* const progress_;
  Tracer* const tracer_;
  const Config config_;
  BlockStore* const store_ CAIRN_PT_GUARDED_BY(*mu_);
  Owner* const owner_;
  const TimePoint opened_at_ = std::chrono::steady_clock::now();
  // Set before Prepare (the threads start after it), then constant.
  os::MemoryPinner* pinner_;
  bool registration_ = false;  // pinner_ registers with the GPU driver

  MemoryMovers* const movers_;
  // movers_->changed(): memory went idle, cache fully touched or grown.
  std::condition_variable_any& cv_;
  InitStats stats_ CAIRN_GUARDED_BY(*mu_);
  bool pinned_ CAIRN_GUARDED_BY(*mu_) = false;
  TouchModel touch_model_ CAIRN_GUARDED_BY(*mu_);
  TouchModel::Mode touch_mode_ CAIRN_GUARDED_BY(*mu_) = TouchModel::Mode::kConcurrent;
  std::optional<TimePoint> last_capture_end_ CAIRN_GUARDED_BY(*mu_);
  std::atomic<bool> touching_{false};  // the thread is touching right now
  std::jthread thread_;                // last: joined before the rest goes
};

}  // namespace cairn::core
