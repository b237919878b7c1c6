// A node-wide mutual-exclusion lock between processes, without a daemon.
//
// Used to serialize the pinning of host caches across the processes of one
// node (docs/design.md, "Fast initialization"): pinning many GiB at once from
// several processes makes every one of them slower (the HiPC'22 paper measured
// serial pinning 6.4x faster than parallel pinning), so processes take turns.
//
// Implementation: flock(LOCK_EX) on a file. The kernel drops the lock when the
// holder's descriptor is closed, including when the holder dies (SIGKILL, OOM
// kill): a dead holder can never leave a stale lock. Waiting polls with
// LOCK_NB so that a waiter can give up when its owner shuts down (a blocking
// flock could only be interrupted by a signal). Waiters are served in no
// particular order; each process pins once, so every process gets one turn.
//
// The lock file must live on a node-local file system (flock over NFS is
// emulated with byte-range locks and may not be node-wide): the default is in
// /dev/shm, falling back to $TMPDIR or /tmp.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "cairn/status.hpp"

namespace cairn::os {

// Default lock path for this user: /dev/shm/cairn-pin-<uid>.lock when /dev/shm
// exists, else ${TMPDIR:-/tmp}/cairn-pin-<uid>.lock. Per user, so that another
// user cannot hold it forever.
std::string DefaultPinLockPath();

class NodeLock {
 public:
  NodeLock() = default;
  ~NodeLock();  // Release()
  NodeLock(NodeLock&& other) noexcept;
  NodeLock& operator=(NodeLock&& other) noexcept;
  NodeLock(const NodeLock&) = delete;
  NodeLock& operator=(const NodeLock&) = delete;

  // Takes the lock on `path` (created 0600 if missing), polling every `poll`
  // until it is free or `give_up()` returns true (then kState "held by
  // another process").
  // kIo names the path when the file cannot be opened or locked.
  static Result<NodeLock> Acquire(const std::string& path, const std::function<bool()>& give_up,
                                  std::chrono::microseconds poll = std::chrono::microseconds(2000));
  // One attempt (Acquire giving up at once): kState "held by another
  // process" when it is taken.
  static Result<NodeLock> TryAcquire(const std::string& path);

  bool held() const { return fd_ >= 0; }
  void Release();

 private:
  int fd_ = -1;
};

}  // namespace cairn::os
