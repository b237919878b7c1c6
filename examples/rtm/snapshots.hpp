// Where the forward pass keeps its source-wavefield snapshots until the
// backward pass needs them (in reverse order): a Cairn history, or the naive
// baseline of one file per snapshot written (and, if asked, fsynced) on the
// caller's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <cairn/cairn.hpp>

namespace rtm {

class SnapshotStore {
 public:
  virtual ~SnapshotStore() = default;
  virtual const char* name() const = 0;
  // Keeps `bytes` bytes at data as snapshot `step`.
  virtual cairn::Status Push(int64_t step, const void* data, size_t bytes) = 0;
  // Copies snapshot `step` (exactly `bytes` bytes) into dst and forgets it.
  virtual cairn::Status Pop(int64_t step, void* dst, size_t bytes) = 0;
  // Releases everything (files included).
  virtual cairn::Status Close() = 0;
};

// Cairn: client->OpenHistory("rtm"), Push in the forward pass, Pop (with
// prefetching into the host cache) in the backward pass.
class CairnStore final : public SnapshotStore {
 public:
  // Opens a client with its scratch directory under `scratch_dir` and a host
  // cache of `host_cache_bytes`, and the history "rtm". A non-empty
  // `trace_path` records Cairn's timeline there (written at Close).
  static cairn::Result<std::unique_ptr<CairnStore>> Open(const std::string& scratch_dir,
                                                         uint64_t host_cache_bytes,
                                                         const std::string& trace_path);
  ~CairnStore() override;
  const char* name() const override { return "async"; }
  cairn::Status Push(int64_t step, const void* data, size_t bytes) override;
  cairn::Status Pop(int64_t step, void* dst, size_t bytes) override;
  cairn::Status Close() override;
  cairn::Stats GetStats() const { return client_->GetStats(); }

 private:
  CairnStore() = default;
  std::unique_ptr<cairn::Client> client_;
  std::unique_ptr<cairn::History> history_;
};

// The baseline: snapshot `step` is the file <dir>/snap-<step>.bin, written
// with write() (+ fsync() when `fsync`) and read back (then unlinked) on the
// calling thread. Snapshots are scratch data, which a careful naive code
// writes without fsync (as Cairn writes history steps); with fsync it pays
// what a checkpoint would.
class SyncStore final : public SnapshotStore {
 public:
  static cairn::Result<std::unique_ptr<SyncStore>> Open(const std::string& dir, bool fsync);
  ~SyncStore() override;
  const char* name() const override { return fsync_ ? "sync+fsync" : "sync"; }
  cairn::Status Push(int64_t step, const void* data, size_t bytes) override;
  cairn::Status Pop(int64_t step, void* dst, size_t bytes) override;
  cairn::Status Close() override;
  uint64_t bytes_written() const { return written_; }
  uint64_t bytes_read() const { return read_; }

 private:
  SyncStore(std::string dir, bool fsync) : dir_(std::move(dir)), fsync_(fsync) {}
  std::string Path(int64_t step) const;
  std::string dir_;
  bool fsync_;
  uint64_t written_ = 0, read_ = 0;
};

}  // namespace rtm
