// Who is moving memory right now, by kind: the application's captures and
// restores and the background stages' block I/O (flush writes, prefetch
// reads, device drains). The initializer's touch model reads it to decide
// whether touching the host cache would compete for the memory bandwidth
// (Initializer::MustPauseTouching, docs/design.md "Fast initialization").
//
// Lock-free: the counts are atomics that any thread changes without the
// pipeline's mutex. changed() is notified whenever a count drops to zero;
// the initializer's thread waits on it (with the pipeline's mutex).
#pragma once

#include <atomic>
#include <condition_variable>

namespace cairn::core {

class MemoryMovers {
 public:
  enum class Kind {
    kCapture,       // the application copies into the cache
    kRestore,       // the application waits on a read from files into its memory
    kBackgroundIo,  // a flush write, prefetch read or device drain
  };

  // A mover of `kind` starts (+1) or ends (-1).
  void Add(Kind kind, int delta) {
    if (count(kind).fetch_add(delta, std::memory_order_relaxed) + delta == 0) changed_.notify_all();
  }
  int now(Kind kind) const { return count(kind).load(std::memory_order_relaxed); }
  std::condition_variable_any& changed() { return changed_; }

  // Counts one mover of `kind` for its lifetime.
  class Scope {
   public:
    Scope(MemoryMovers* movers, Kind kind) : movers_(movers), kind_(kind) {
      movers_->Add(kind_, +1);
    }
    ~Scope() { movers_->Add(kind_, -1); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    MemoryMovers* const movers_;
    const Kind kind_;
  };

 private:
  std::atomic<int>& count(Kind kind) { return counts_[static_cast<int>(kind)]; }
  const std::atomic<int>& count(Kind kind) const { return counts_[static_cast<int>(kind)]; }

  std::atomic<int> counts_[3] = {};
  std::condition_variable_any changed_;
};

}  // namespace cairn::core
