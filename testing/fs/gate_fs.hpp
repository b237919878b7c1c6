// GateFs: a FileSystem for tests that holds one kind of open at a gate, so
// that a test can stop a background stage at a known point without sleeping,
// and counts the bytes read per path.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "os/fs/fs.hpp"
#include "util/mutex.hpp"
#include "util/thread_annotations.hpp"

namespace cairn::test {

// Forwards to the default file system; once armed (at construction unless
// `armed` is false, else by Arm()), opening for writing (gate_reads: for
// reading) a path that contains `gated` blocks until Release() (or its
// SyncDir: GateSyncDirInstead). Records every opened path, counts the bytes
// read per path and the opens for reading that asked for O_DIRECT.
class GateFs final : public os::FileSystem {
 public:
  explicit GateFs(std::string gated, bool gate_reads = false, bool armed = true)
      : gated_(std::move(gated)), gate_reads_(gate_reads), armed_(armed) {}

  // The gate holds SyncDir of a path that contains `gated` instead of the
  // opens (a store that is durable only after its directory's fsync).
  void GateSyncDirInstead() {
    MutexLock lock(&mu_);
    gate_sync_dir_ = true;
  }

  void Arm() {
    MutexLock lock(&mu_);
    armed_ = true;
  }

  void Release() {
    MutexLock lock(&mu_);
    released_ = true;
    cv_.notify_all();
  }
  bool WaitBlocked(std::chrono::milliseconds limit) {
    MutexLock lock(&mu_);
    return cv_.wait_for(lock, limit, [&]() CAIRN_REQUIRES(mu_) { return blocked_; });
  }
  std::vector<std::string> opened() const {
    MutexLock lock(&mu_);
    return opened_;
  }
  // Bytes read so far from paths that contain `part`.
  uint64_t bytes_read(const std::string& part) const {
    MutexLock lock(&mu_);
    uint64_t n = 0;
    for (const auto& [path, bytes] : read_bytes_) n += path.find(part) != std::string::npos ? bytes : 0;
    return n;
  }
  // Opens for reading of paths that contain `part`: all of them, and those
  // that asked for O_DIRECT (whether or not the file system grants it).
  int read_opens(const std::string& part, bool direct_only) const {
    MutexLock lock(&mu_);
    int n = 0;
    for (const auto& [path, direct] : read_opens_) {
      n += path.find(part) != std::string::npos && (direct || !direct_only) ? 1 : 0;
    }
    return n;
  }
  // Waits until a RemoveDir call has succeeded.
  bool WaitDirRemoved(std::chrono::milliseconds limit) {
    MutexLock lock(&mu_);
    return cv_.wait_for(lock, limit, [&]() CAIRN_REQUIRES(mu_) { return dirs_removed_ > 0; });
  }

  Result<std::unique_ptr<os::File>> Open(const std::string& path,
                                         const os::OpenOptions& o) override {
    {
      MutexLock lock(&mu_);
      opened_.push_back(path);
      if (!o.write) read_opens_.emplace_back(path, o.direct);
      if (!gate_sync_dir_ && o.write != gate_reads_) Hold(lock, path);
    }
    auto f = base_->Open(path, o);
    if (!f.ok() || o.write) return f;
    return std::unique_ptr<os::File>(new CountingFile(this, std::move(f).value()));
  }
  Status Rename(const std::string& a, const std::string& b) override { return base_->Rename(a, b); }
  Status Remove(const std::string& p) override { return base_->Remove(p); }
  Status CreateDirs(const std::string& p, uint32_t m) override { return base_->CreateDirs(p, m); }
  Status RemoveDir(const std::string& p) override {
    Status s = base_->RemoveDir(p);
    MutexLock lock(&mu_);
    if (s.ok()) ++dirs_removed_;
    cv_.notify_all();
    return s;
  }
  Status SyncDir(const std::string& p) override {
    {
      MutexLock lock(&mu_);
      if (gate_sync_dir_) Hold(lock, p);
    }
    return base_->SyncDir(p);
  }
  Result<std::vector<os::DirEntry>> List(const std::string& p) override { return base_->List(p); }
  Result<os::FileInfo> Stat(const std::string& p) override { return base_->Stat(p); }

 private:
  // At the gate, when armed and `path` is gated: blocks until Release.
  void Hold(MutexLock& lock, const std::string& path) CAIRN_REQUIRES(mu_) {
    if (!armed_ || path.find(gated_) == std::string::npos) return;
    blocked_ = true;
    cv_.notify_all();
    while (!released_) cv_.wait(lock);
  }

  // A file opened for reading: counts what ReadAt returns.
  class CountingFile final : public os::File {
   public:
    CountingFile(GateFs* fs, std::unique_ptr<os::File> f) : fs_(fs), f_(std::move(f)) {}
    Status WriteAt(const void* b, size_t n, uint64_t off) override { return f_->WriteAt(b, n, off); }
    Status ReadAt(void* b, size_t n, uint64_t off) override {
      Status s = f_->ReadAt(b, n, off);
      if (s.ok()) {
        MutexLock lock(&fs_->mu_);
        fs_->read_bytes_[f_->path()] += n;
      }
      return s;
    }
    Status Sync() override { return f_->Sync(); }
    Result<uint64_t> Size() override { return f_->Size(); }
    Status Truncate(uint64_t size) override { return f_->Truncate(size); }
    Status Close() override { return f_->Close(); }
    const std::string& path() const override { return f_->path(); }
    bool direct() const override { return f_->direct(); }

   private:
    GateFs* const fs_;
    const std::unique_ptr<os::File> f_;
  };

  os::FileSystem* const base_ = os::FileSystem::Default();
  const std::string gated_;
  const bool gate_reads_;
  mutable Mutex mu_;
  std::condition_variable_any cv_;
  std::map<std::string, uint64_t> read_bytes_ CAIRN_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, bool>> read_opens_ CAIRN_GUARDED_BY(mu_);  // path, direct
  bool armed_ CAIRN_GUARDED_BY(mu_);
  bool gate_sync_dir_ CAIRN_GUARDED_BY(mu_) = false;
  bool released_ CAIRN_GUARDED_BY(mu_) = false;
  bool blocked_ CAIRN_GUARDED_BY(mu_) = false;
  std::vector<std::string> opened_ CAIRN_GUARDED_BY(mu_);
  int dirs_removed_ CAIRN_GUARDED_BY(mu_) = 0;
};

// Releases a GateFs when it goes out of scope (declare it after the client so
// that it runs first and the client's Close cannot hang on the gate).
struct GateRelease {
  GateFs* gate;
  ~GateRelease() { gate->Release(); }
};

}  // namespace cairn::test
