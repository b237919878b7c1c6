// An annotated mutex and its scoped guard, so that Clang's -Wthread-safety can
// check CAIRN_GUARDED_BY / CAIRN_REQUIRES (util/thread_annotations.hpp).
// std::mutex carries no annotations in libstdc++, hence this thin wrapper.
//
// Both types also offer lock()/unlock() (BasicLockable), so they work with
// std::condition_variable_any:
//
//   MutexLock l(&mu_);
//   cv_.wait(l, [&] { return ready_; });   // cv_ is a condition_variable_any
//
// or, to use std::condition_variable, wait on a std::unique_lock built from
// mu_.native() (then the analysis does not see the lock: annotate the function
// with CAIRN_REQUIRES or CAIRN_NO_THREAD_SAFETY_ANALYSIS as appropriate).
#pragma once

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "util/thread_annotations.hpp"

namespace cairn {

// Non-recursive; not copyable or movable.
class CAIRN_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() CAIRN_ACQUIRE() {
    mu_.lock();
    Took();
  }
  void Unlock() CAIRN_RELEASE() {
    Gave();
    mu_.unlock();
  }
  bool TryLock() CAIRN_TRY_ACQUIRE(true) {
    if (!mu_.try_lock()) return false;
    Took();
    return true;
  }

  // BasicLockable spelling (std::lock_guard, std::condition_variable_any).
  void lock() CAIRN_ACQUIRE() { Lock(); }
  void unlock() CAIRN_RELEASE() { Unlock(); }
  bool try_lock() CAIRN_TRY_ACQUIRE(true) { return TryLock(); }

  // Tells the analysis the mutex is held, where it cannot see that (a
  // Worker's *mu is its owner's mutex). Debug builds (no NDEBUG) check it:
  // the calling thread must be the one that locked it through this class,
  // else it is a locking bug in Cairn, reported on stderr and aborted there
  // and then, not left to corrupt state. Release builds do not check.
  void AssertHeld() const CAIRN_ASSERT_CAPABILITY(this) {
#ifndef NDEBUG
    if (owner_.load(std::memory_order_relaxed) != std::this_thread::get_id()) {
      std::fputs("cairn: internal error: Mutex::AssertHeld on a mutex this thread does not hold\n",
                 stderr);
      std::abort();
    }
#endif
  }

  // The underlying std::mutex, for std::unique_lock + std::condition_variable
  // (a lock taken this way is not seen by AssertHeld).
  std::mutex& native() CAIRN_RETURN_CAPABILITY(this) { return mu_; }

 private:
  // The thread holding it. Kept in every build, so that the class has one
  // layout whatever NDEBUG is where it is compiled; only AssertHeld's check
  // depends on it. Only the owner compares its own id with this, so relaxed
  // order is enough: a thread sees its own last store, and never its id
  // stored by another.
  void Took() { owner_.store(std::this_thread::get_id(), std::memory_order_relaxed); }
  void Gave() { owner_.store(std::thread::id(), std::memory_order_relaxed); }
  std::atomic<std::thread::id> owner_{};
  std::mutex mu_;
};

// Holds `mu` from construction to destruction, except between Unlock() and
// Lock() (annotated: the analysis follows a relock inside one function).
// lock()/unlock() let a std::condition_variable_any release and re-acquire it
// during a wait; the mutex is held again whenever the wait returns, so the
// guard's invariant (held while in scope) is what the analysis assumes.
class CAIRN_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) CAIRN_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() CAIRN_RELEASE() {
    if (locked_) mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // Drops the mutex early / takes it again (say, around I/O).
  void Unlock() CAIRN_RELEASE() {
    mu_->Unlock();
    locked_ = false;
  }
  void Lock() CAIRN_ACQUIRE() {
    mu_->Lock();
    locked_ = true;
  }

  // For std::condition_variable_any only; do not call directly.
  void lock() CAIRN_NO_THREAD_SAFETY_ANALYSIS { mu_->Lock(); }
  void unlock() CAIRN_NO_THREAD_SAFETY_ANALYSIS { mu_->Unlock(); }

 private:
  Mutex* const mu_;
  bool locked_ = true;
};

// The reverse guard: releases `mu`, which the caller holds, for its scope and
// takes it again at the end. A function annotated CAIRN_REQUIRES(mu) that
// drops the lock for I/O or a copy says so with one of these:
//
//   void Flusher::WriteOne() CAIRN_REQUIRES(mu_) {
//     ...                                   // guarded state
//     { MutexUnlock unlocked(&mu_); io(); } // no guarded state in here
//     ...                                   // guarded state again
//   }
//
// (Clang models a scoped capability whose constructor releases: its
// destructor, annotated RELEASE, undoes that, i.e. re-acquires.)
class CAIRN_SCOPED_CAPABILITY MutexUnlock {
 public:
  explicit MutexUnlock(Mutex* mu) CAIRN_RELEASE(mu) : mu_(mu) { mu_->Unlock(); }
  ~MutexUnlock() CAIRN_RELEASE() { mu_->Lock(); }
  MutexUnlock(const MutexUnlock&) = delete;
  MutexUnlock& operator=(const MutexUnlock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace cairn
