// A node-wide mutual-exclusion lock between processes, without a daemon.
//
// Used to serialize the pinning of host caches across the processes of one
// node (docs/design.md, "Fast initialization"): pinning many GiB at once from
// several processes makes every one of them slower (the HiPC'22 paper measured
// serial pinning 6.4x faster than parallel pinning), so processes take turns.
//
// Waiters are served first come, first served (the paper's processes "take
// turns"): a process that asked earlier pins earlier, and none can be passed
// over forever by luckier pollers.
//
// Implementation: a ticket queue in a directory, `<path>.queue/`, one file
// per process in it, named by its ticket and flock(LOCK_EX)ed by its owner
// for as long as it waits or holds. The kernel drops a flock when the owner's
// descriptor is closed, including when the owner dies (SIGKILL, OOM kill), so
// a dead process's entry is recognizably unlocked: whoever meets it removes
// it, and neither a dead holder nor a dead waiter can block the queue (no
// stale lock, no daemon). The lock is held by the lowest ticket whose file is
// still locked. Tickets are taken under a brief flock of `<path>` (the
// admission lock), which also keeps the last ticket number, and an entry is
// locked before that lock is let go: so every entry below a waiter's ticket
// was locked before the waiter looked, and an unlocked one is dead.
// Waiting polls (`poll`) so that a waiter can give up when its owner shuts
// down (a blocking flock could only be interrupted by a signal).
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

// The queue directory of the lock at `path`: `<path>.queue`.
std::string NodeLockQueueDir(const std::string& path);

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

  // Queues for the lock at `path` (the file and the queue directory are
  // created 0600 / 0700 if missing) and waits, polling every `poll`, until
  // every process queued before has released it or died, or until
  // `give_up()` returns true (then it leaves the queue: kState "held by
  // another process").
  // kIo names the path when the file or directory cannot be created, opened
  // or locked.
  static Result<NodeLock> Acquire(const std::string& path, const std::function<bool()>& give_up,
                                  std::chrono::microseconds poll = std::chrono::microseconds(2000));
  // One attempt (Acquire giving up at once): kState "held by another
  // process" when another live process is queued before.
  static Result<NodeLock> TryAcquire(const std::string& path);

  bool held() const { return fd_ >= 0; }
  // Leaves the queue: removes this process's entry and closes it.
  void Release();

 private:
  int fd_ = -1;        // the locked queue entry
  std::string entry_;  // its path
};

}  // namespace cairn::os
