// Cairn's own progress for the redundancy in the background (docs/mpi.md,
// "Progress"): where the group's transport lets a second thread use it
// while the application's thread makes its own calls (Group::
// thread_multiple(): MPI_THREAD_MULTIPLE), a thread of this object's runs
// the passes that otherwise run only inside the application's Cairn calls
// (the global commit's rounds, the partner copies' messages, reads and
// writes). So the global commit is learned and the partner copies travel
// while the application computes without calling Cairn. MPI-free: a pass is
// whatever implements Pass.
//
// The thread paces itself by what the last pass reported, so that a job with
// nothing in flight costs no CPU: kBusy (messages in flight) runs the next
// pass after busy_period, kWaiting (waiting for a local commit, a store)
// after waiting_period, kIdle after idle_period; Kick() runs one at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <thread>

#include "util/mutex.hpp"

namespace cairn::redundancy {

// What a pass left to do; the greatest of several parts' paces wins.
enum class Pace { kIdle = 0, kWaiting = 1, kBusy = 2 };

class ProgressThread {
 public:
  struct Periods {
    std::chrono::microseconds busy{100};
    std::chrono::microseconds waiting{1000};
    std::chrono::microseconds idle{20000};
    // > 0: the thread asks the kernel for scheduler slices this short
    // (os/sched/slice.hpp), so that it runs at its wake-up on cores the
    // application keeps busy; where the kernel cannot, it runs as others.
    std::chrono::microseconds slice{0};
  };
  // One pass of progress.
  class Pass {
   public:
    // Never waits for another member; runs on the thread only, one at a
    // time. Returns what is left to do.
    virtual Pace Run() = 0;

   protected:
    ~Pass() = default;
  };
  // `pass` outlives this object (or its Stop). Starts the thread.
  ProgressThread(Pass* pass, Periods periods);
  // Stop()s.
  ~ProgressThread();
  ProgressThread(const ProgressThread&) = delete;
  ProgressThread& operator=(const ProgressThread&) = delete;

  // Work arrived (a checkpoint, a queued copy): the next pass runs now.
  // Any thread.
  void Kick() CAIRN_EXCLUDES(mu_);
  // Returns once the thread ended; no pass runs afterwards. Any thread but
  // the pass's own; idempotent.
  void Stop() CAIRN_EXCLUDES(mu_);
  // Passes run so far.
  uint64_t passes() const CAIRN_EXCLUDES(mu_);

 private:
  void Loop(std::stop_token stop) CAIRN_EXCLUDES(mu_);

  Pass* const pass_;
  const Periods periods_;
  mutable Mutex mu_;
  std::condition_variable_any cv_;  // a kick or a stop
  bool kicked_ CAIRN_GUARDED_BY(mu_) = false;
  uint64_t passes_ CAIRN_GUARDED_BY(mu_) = 0;
  std::jthread thread_;  // last: started once the rest exists
};

}  // namespace cairn::redundancy
