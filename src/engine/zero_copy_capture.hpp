// The pipeline's zero-copy epochs (docs/design.md, "Zero-copy captures"):
// the checkpoint call plans the version as a copy capture does,
// write-protects its host memory (Begin: an epoch of core::ZeroCopy) and
// returns; a reader thread (Read) then runs the copy capture's batch loop,
// taking each host piece through ZeroCopy::Read, so the host cache is only
// the flush's staging area. One epoch at a time: the next capture, a
// restore and a pop wait for the reader first (Join, WaitIdle). With the
// learned order the engine watches first writes after the read until the
// next checkpoint; a restore, a pop and Shutdown end that watch.
//
// It owns the engine (made at the first zero-copy checkpoint), whether an
// epoch is being read, the reader's spare-chunk count and the reader
// thread. Locking: the pipeline's mutex `mu` guards all of it but the
// thread, which the pipeline's `capture_mu` (captures are serialized)
// guards; the reader takes `mu` itself. Clang cannot see that the
// pipeline's mutexes and the pointers here are the same, so the methods
// that need them held assert it (AssertHeld, checked at run time in debug
// builds), as a Worker does; each says which it needs.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cairn/cairn.hpp"
#include "capture/layering.hpp"
#include "capture/zero_copy/spare_count.hpp"
#include "capture/zero_copy/zero_copy.hpp"
#include "format/layout.hpp"
#include "util/clock.hpp"
#include "util/mutex.hpp"
#include "util/thread_annotations.hpp"

namespace cairn::core {

class ZeroCopyCapture {
 public:
  // `stats`: the pipeline's zero-copy stats (guarded by *mu); `idle` is
  // notified when an epoch's read ends.
  ZeroCopyCapture(Mutex* mu, Mutex* capture_mu, std::condition_variable_any* idle,
                  const Config& config, ZeroCopyStats* stats)
      : mu_(mu), capture_mu_(capture_mu), idle_(idle), config_(config), stats_(stats) {}

  // Begins the epoch of checkpoint `name` `number` (layout l over `sources`):
  // its host memory protected, the partial pages at unaligned region ends
  // copied. false, with why in the stats' note (the first time), when it
  // must be copied instead: memory that is not host memory, or no engine.
  // Needs mu and capture_mu held.
  bool Begin(const format::Layout& l, const std::vector<CaptureSource>& sources,
             const std::string& name, int64_t number, SteadyTime t0);
  // After Begin: the reader thread runs read(engine, sources) (the capture's
  // batch loop through the epoch, under *mu; it calls EndEpoch, then
  // EndRead), then puts back the huge pages the epoch split. The thread
  // keeps its own copy of `sources`, which it lends to read; `l` must
  // outlive the thread (read holds the entry). Needs mu and capture_mu held.
  template <typename ReadFn>
  void Read(const format::Layout& l, const std::vector<CaptureSource>& sources, ReadFn read) {
    mu_->AssertHeld();
    capture_mu_->AssertHeld();
    busy_ = true;
    reader_ = std::jthread([this, &l, sources, zc = engine_.get(),
                            read = std::move(read)](std::stop_token stop) mutable {
      read(zc, sources);
      RestoreHugePages(l, sources, stop);
    });
  }
  // The reader's batch loop is over: whatever was not read (an error) is
  // released. Needs mu held.
  void EndEpoch();
  // The reader is done with the epoch (its capture ended): waiters for it
  // go on. Needs mu held.
  void EndRead();
  // The previous epoch's reader is done (joined). Needs capture_mu held, and
  // mu not (the reader takes it).
  void Join() CAIRN_EXCLUDES(*mu_);
  // No epoch is being read (a restore and a pop write into memory that may
  // be protected, holding mu, which the reader needs), and the last epoch's
  // watch of first writes is over (no protection left).
  void WaitIdle() CAIRN_EXCLUDES(*mu_);
  // checkpoint.changes = pages under zero-copy: the regions' written pages
  // come from the engine's watch (ZeroCopy::Written), not from an
  // os::PageTracker (which would own the memory's write protection).
  void UsePageSources(Layering& layering);

  // The reader's spares for RED pages (Pipeline::Capturer::HoldRoom), learned per
  // epoch. Needs mu held.
  SpareCount& spares() {
    mu_->AssertHeld();
    return spare_count_;
  }
  // The engine's counters into *s (nothing before the first epoch). Needs
  // mu held.
  void AddCounters(ZeroCopyStats* s) const;

 private:
  // Creates the engine at the first epoch.
  Status MakeEngine() CAIRN_REQUIRES(*mu_);
  // *epochs: epochs begun so far (the watched one is the last).
  Result<ExtentList> Written(const void* data, uint64_t bytes, uint64_t* epochs)
      CAIRN_EXCLUDES(*mu_);
  void RestoreHugePages(const format::Layout& l, const std::vector<CaptureSource>& sources,
                        const std::stop_token& stop) CAIRN_EXCLUDES(*mu_);

  Mutex* const mu_;
  Mutex* const capture_mu_;
  std::condition_variable_any* const idle_;
  const Config& config_;
  ZeroCopyStats* const stats_ CAIRN_PT_GUARDED_BY(*mu_);
  std::unique_ptr<ZeroCopy> engine_ CAIRN_GUARDED_BY(*mu_);
  Status unavailable_ CAIRN_GUARDED_BY(*mu_);  // the engine could not be made: copy from now on
  bool busy_ CAIRN_GUARDED_BY(*mu_) = false;   // an epoch is being read
  SpareCount spare_count_ CAIRN_GUARDED_BY(*mu_);
  std::jthread reader_ CAIRN_GUARDED_BY(*capture_mu_);  // last: joined first
};

}  // namespace cairn::core
