// One background stage of the pipeline: an owned std::jthread that takes jobs
// and runs them, the shape every stage shares (wait for work, take it, mark
// it in hand, run it, mark it done, wake whoever waits for progress):
//
//   checksummer   jobs: sealed blocks, queued by captures and drains
//   flusher       jobs: entries, queued by captures, in capture order
//   mover         jobs: tasks (persist, retention, deletions)
//   prefetcher    no queue: TakeJob finds the next history step to load
//   device mover  jobs: blocks to drain; else TakeJob finds a step to copy
//                 host -> device
//
// The stage is a template parameter, not a set of callbacks: Worker calls
// its methods directly, so following a job means reading the stage's class.
// A Stage has, both called with *mu held:
//
//   void RunJob(Job& job);                   does the job; may drop *mu
//                                            meanwhile (a MutexUnlock) for
//                                            I/O or copies
//   std::optional<Job> TakeJob(Worker& w);   optional: the next job, or
//                                            nullopt (wait); without it, the
//                                            queue's front
//
// A stage that keeps these private declares the Worker its friend.
//
// A Worker shares its owner's mutex (the pipeline's `mu_`, which guards the
// entries the jobs work on): the queue and the job in hand are guarded by it.
// Clang cannot see that the owner's `mu_` and a worker's `*mu_` are one
// mutex, so the methods below, and the stages' RunJob and TakeJob, assert it
// (AssertHeld, which debug builds check at run time) where the owner
// requires it (CAIRN_REQUIRES(mu_)).
//
// Stopping: RequestStop() asks, Join() waits. The thread returns once stop
// is requested and TakeJob yields nothing; the owner drains the queues before
// (Pipeline::Shutdown waits for Idle()).
#pragma once

#include <condition_variable>
#include <deque>
#include <optional>
#include <stop_token>
#include <thread>
#include <utility>

#include "engine/trace.hpp"
#include "util/mutex.hpp"

namespace cairn::core {

template <typename Job, typename Stage>
class Worker {
 public:
  // done: notified (under *mu) after every job, for waiters on progress.
  // stage: outlives the worker (it is usually the worker's owner).
  Worker(Mutex* mu, std::condition_variable_any* done, Stage* stage)
      : mu_(mu), done_(done), stage_(stage) {}
  ~Worker() { Stop(); }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Starts the thread; `name` (if set) names it in the tracer's timeline.
  void Start(const char* name = nullptr, Tracer* tracer = nullptr) {
    thread_ = std::jthread([this, name, tracer](std::stop_token stop) {
      if (name != nullptr && tracer != nullptr) tracer->NameThread(name);
      Loop(stop);
    });
  }
  void RequestStop() {
    thread_.request_stop();
    Wake();
  }
  void Stop() {
    RequestStop();
    if (thread_.joinable()) thread_.join();
  }

  // Precondition (all below): *mu held.
  void Push(Job job) {
    mu_->AssertHeld();
    queue_.push_back(std::move(job));
    cv_.notify_one();
  }
  // Nothing queued and no job in hand.
  bool Idle() const {
    mu_->AssertHeld();
    return queue_.empty() && !in_hand_;
  }
  const std::deque<Job>& queue() const {
    mu_->AssertHeld();
    return queue_;
  }
  // The job being run, if any.
  const std::optional<Job>& in_hand() const {
    mu_->AssertHeld();
    return in_hand_;
  }
  // Pops the queue's front (for TakeJob).
  std::optional<Job> PopFront() {
    mu_->AssertHeld();
    if (queue_.empty()) return std::nullopt;
    std::optional<Job> job(std::move(queue_.front()));
    queue_.pop_front();
    return job;
  }

  // Wakes the thread: state that TakeJob reads changed. Also the condition
  // a job waits on inside RunJob (the flusher waits for checksums).
  void Wake() { cv_.notify_all(); }
  std::condition_variable_any& cv() { return cv_; }

 private:
  void Loop(std::stop_token stop) {
    MutexLock lock(mu_);
    while (true) {
      std::optional<Job> job;
      if (!cv_.wait(lock, stop, [&]() CAIRN_REQUIRES(*mu_) { return (job = Take()).has_value(); })) {
        return;  // stop requested and nothing to do
      }
      in_hand_ = std::move(job);
      stage_->RunJob(*in_hand_);
      in_hand_.reset();
      done_->notify_all();
    }
  }
  std::optional<Job> Take() {
    mu_->AssertHeld();
    if constexpr (requires(Stage& s, Worker& w) { s.TakeJob(w); }) {
      return stage_->TakeJob(*this);
    } else {
      return PopFront();
    }
  }

  Mutex* const mu_;
  std::condition_variable_any* const done_;
  Stage* const stage_;
  std::condition_variable_any cv_;
  std::deque<Job> queue_ CAIRN_GUARDED_BY(mu_);
  std::optional<Job> in_hand_ CAIRN_GUARDED_BY(mu_);
  std::jthread thread_;  // last: joined before the rest goes
};

}  // namespace cairn::core
