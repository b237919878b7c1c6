// FaultFs: a FileSystem for tests that forwards to another one and injects
// the failures real storage produces: a full disk (ENOSPC after a byte
// budget), EIO from a write/read/fsync, a failing rename or directory fsync,
// an open refused. Faults can be restricted to paths containing a substring
// (e.g. only the persistent directory).
//
// It also models a power loss (testing/fs/power_loss.hpp): TrackPowerLoss(root)
// records which writes and directory changes under root were made durable
// by an fsync; ArmPowerCut(k) makes the kth mutating call from then on find
// the power gone; PowerLoss() rewrites the tree to what survived.
//
//   fs.TrackPowerLoss(dir);
//   fs.ArmPowerCut(k);        // the kth mutating call and all later ones fail (EIO)
//   ... run the library ...   // its calls fail from the cut on
//   fs.PowerLoss();           // unsynced data and entries are gone; power is back
//
//   test::FaultFs fs;                               // wraps FileSystem::Default()
//   fs.SetWriteBudget(1 << 20, "/persistent/");     // a 1 MiB disk there
//   fs.Inject({.op = test::FaultOp::kSync, .err = EIO, .nth = 2});
//   config.fs = &fs;
//
// Thread-safe: every method may be called concurrently with file operations
// from other threads. The FaultFs must outlive every File opened through it.
// Injected errors are built with os::ErrnoStatus, so they carry the same
// Code and message format as real ones.
#pragma once

#include <array>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "os/fs/fs.hpp"
#include "testing/fs/power_loss.hpp"
#include "util/mutex.hpp"
#include "util/thread_annotations.hpp"

namespace cairn::test {

// The operations that can be counted and failed. File operations (kWrite ..
// kTruncate) match the path the file was opened with.
enum class FaultOp : int {
  kOpen = 0,
  kWrite,      // File::WriteAt
  kRead,       // File::ReadAt
  kSync,       // File::Sync
  kSize,       // File::Size
  kTruncate,   // File::Truncate
  kRename,     // matches if either path contains the filter
  kRemove,
  kCreateDirs,
  kRemoveDir,
  kSyncDir,
  kList,
  kStat,
  kCount_  // number of operations, not an operation
};

const char* FaultOpName(FaultOp op);

struct Fault {
  FaultOp op = FaultOp::kWrite;
  int err = EIO;             // errno of the injected failure
  uint64_t nth = 1;          // the nth matching call from now fails (1 = the next one)
  uint64_t times = 1;        // consecutive matching calls that fail from there; 0 = all
  std::string path_filter;   // only calls whose path contains this ("" = any path)
};

class FaultFs final : public os::FileSystem {
 public:
  explicit FaultFs(os::FileSystem* base = os::FileSystem::Default());
  ~FaultFs() override;
  FaultFs(const FaultFs&) = delete;
  FaultFs& operator=(const FaultFs&) = delete;

  // Arms a fault. Faults are independent; the first armed one that fires
  // decides the error. A failed call does nothing (no bytes are written or
  // read, no rename happens), except under the write budget (below).
  void Inject(const Fault& fault) CAIRN_EXCLUDES(mu_);

  // A full disk: writes to paths containing `path_filter` may put `bytes`
  // more bytes through (counted from this call). The write that crosses the
  // budget writes the prefix that still fits — as a real file system does
  // before it reports ENOSPC — and returns kNoSpace; every later such write
  // writes nothing and returns kNoSpace. For direct-I/O files the prefix is
  // rounded down to os::kDirectIoAlignment. Replaces an earlier budget.
  void SetWriteBudget(uint64_t bytes, std::string path_filter = "") CAIRN_EXCLUDES(mu_);
  void ClearWriteBudget() CAIRN_EXCLUDES(mu_);

  // Every ReadAt on a matching path flips the bits of the first byte it
  // returns (silent media corruption; checksums must catch it). "" = all.
  void CorruptReads(std::string path_filter) CAIRN_EXCLUDES(mu_);

  // Calls of `op` since construction or Reset(), failed or not.
  uint64_t calls(FaultOp op) const CAIRN_EXCLUDES(mu_);
  // Payload bytes that reached the base file system through WriteAt / ReadAt.
  uint64_t bytes_written() const CAIRN_EXCLUDES(mu_);
  uint64_t bytes_read() const CAIRN_EXCLUDES(mu_);
  // Number of calls failed on purpose (faults and budget).
  uint64_t faults_fired() const CAIRN_EXCLUDES(mu_);

  // Disarms every fault, the budget and read corruption; zeroes the counters.
  // Power-loss tracking is not affected.
  void Reset() CAIRN_EXCLUDES(mu_);

  // --- Power loss -----------------------------------------------------------
  // Starts tracking the tree under `root` (an existing directory; everything
  // in it now counts as durable). Only calls through this FaultFs are seen:
  // the tree must not change behind its back until PowerLoss(). fsyncs of
  // tracked files and directories are recorded, not passed to the disk.
  Status TrackPowerLoss(const std::string& root) CAIRN_EXCLUDES(model_mu_);
  // The nth mutating call on a tracked path from now (1 = the next one)
  // finds the power gone: it and every later call on a tracked path, reads
  // included, fail with EIO and change nothing, until PowerLoss(). Mutating
  // calls: open for writing, write, fsync, truncate, rename, unlink, mkdir,
  // rmdir, directory fsync.
  void ArmPowerCut(uint64_t nth) CAIRN_EXCLUDES(model_mu_);
  bool power_cut() const CAIRN_EXCLUDES(model_mu_);
  // Mutating calls on tracked paths since TrackPowerLoss() or PowerLoss(),
  // up to and including the one that found the power cut.
  uint64_t tracked_mutations() const CAIRN_EXCLUDES(model_mu_);
  // Unsynced changes under the root (see PowerLossModel::pending()).
  size_t unsynced_changes() const CAIRN_EXCLUDES(model_mu_);
  // Cuts the power (if ArmPowerCut has not), rewrites the tree to what
  // survives under `unsynced`, and powers on: calls succeed again, tracking
  // goes on with the survivors as durable state, the counter restarts.
  // Files still open through this FaultFs must not be used afterwards.
  Status PowerLoss(Unsynced unsynced = Unsynced::kDrop) CAIRN_EXCLUDES(model_mu_);

  os::FileSystem* base() const { return base_; }

  // os::FileSystem
  Result<std::unique_ptr<os::File>> Open(const std::string& path, const os::OpenOptions& options) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status Remove(const std::string& path) override;
  Status CreateDirs(const std::string& path, uint32_t mode) override;
  Status RemoveDir(const std::string& path) override;
  Status SyncDir(const std::string& path) override;
  Result<std::vector<os::DirEntry>> List(const std::string& path) override;
  Result<os::FileInfo> Stat(const std::string& path) override;

 private:
  class FaultFile;

  struct ArmedFault {
    Fault fault;
    uint64_t seen = 0;   // matching calls so far
    uint64_t fired = 0;  // failures injected so far
  };

  // Counts a call of `op` on `path` (and `path2` for renames) and returns the
  // errno to fail it with, or 0 to let it through.
  int Check(FaultOp op, const std::string& path, const std::string& path2 = "") CAIRN_EXCLUDES(mu_);
  // For a write of n bytes: how many may go through (n unless the budget
  // runs out), or an errno from an injected fault in *err. Reserves the
  // allowed bytes against the budget.
  size_t AdmitWrite(const std::string& path, size_t n, bool direct, int* err) CAIRN_EXCLUDES(mu_);
  bool ShouldCorruptRead(const std::string& path, size_t n) CAIRN_EXCLUDES(mu_);
  // The power-loss gate for a call on `path` (and `path2`): EIO when the
  // power is out or is cut by this (mutating) call, 0 otherwise.
  int PowerGateLocked(bool mutating, const std::string& path, const std::string& path2 = "")
      CAIRN_REQUIRES(model_mu_);
  int CheckLocked(FaultOp op, const std::string& path, const std::string& path2) CAIRN_REQUIRES(mu_);

  os::FileSystem* const base_;
  // Held across every mutating call and its model update, so that the model
  // sees changes in the order the base file system applied them. Taken
  // before mu_.
  mutable Mutex model_mu_;
  PowerLossModel model_ CAIRN_GUARDED_BY(model_mu_);
  uint64_t mutations_ CAIRN_GUARDED_BY(model_mu_) = 0;
  uint64_t cut_at_ CAIRN_GUARDED_BY(model_mu_) = 0;  // 0 = not armed
  bool power_out_ CAIRN_GUARDED_BY(model_mu_) = false;
  mutable Mutex mu_;
  std::vector<ArmedFault> faults_ CAIRN_GUARDED_BY(mu_);
  std::array<uint64_t, static_cast<size_t>(FaultOp::kCount_)> calls_ CAIRN_GUARDED_BY(mu_){};
  bool budget_set_ CAIRN_GUARDED_BY(mu_) = false;
  uint64_t budget_left_ CAIRN_GUARDED_BY(mu_) = 0;
  std::string budget_filter_ CAIRN_GUARDED_BY(mu_);
  bool corrupt_reads_ CAIRN_GUARDED_BY(mu_) = false;
  std::string corrupt_filter_ CAIRN_GUARDED_BY(mu_);
  uint64_t bytes_written_ CAIRN_GUARDED_BY(mu_) = 0;
  uint64_t bytes_read_ CAIRN_GUARDED_BY(mu_) = 0;
  uint64_t faults_fired_ CAIRN_GUARDED_BY(mu_) = 0;
};

}  // namespace cairn::test
