// ReadBlocks (block_reader.hpp): a few workers, each with its own file
// descriptor, pull blocks in plan order and verify them as they land.
//
// Why threads and pread rather than io_uring: a restore reads a few hundred
// blocks of megabytes, so one system call per block costs nothing next to the
// transfer; what matters is that several large requests are queued at the
// device and that the CRC of one block runs while others are in flight, and
// queue_depth threads give both without a new dependency or a kernel feature
// to probe (io_uring is often disabled by seccomp in containers).
#include "format/block_reader.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <system_error>
#include <thread>
#include <vector>

#include "os/mem/memory.hpp"
#include "util/crc32c.hpp"
#include "util/mutex.hpp"
#include "util/thread_annotations.hpp"

namespace cairn::format {
namespace {

constexpr uint64_t kAlign = os::kDirectIoAlignment;
static_assert(kStagingBytes % kAlign == 0);

uint64_t AlignUp(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
bool DirectOk(const void* p, uint64_t n) {
  return reinterpret_cast<uintptr_t>(p) % kAlign == 0 && n % kAlign == 0;
}

}  // namespace

struct StagingPool::Buffer {
  os::Mapping map;
  uint8_t* data = nullptr;
};

struct StagingPool::Impl {
  Mutex mu;
  std::vector<std::unique_ptr<Buffer>> free CAIRN_GUARDED_BY(mu);
};

StagingPool::StagingPool() : impl_(std::make_unique<Impl>()) {}
StagingPool::~StagingPool() = default;

Result<std::unique_ptr<StagingPool::Buffer>> StagingPool::Take() {
  {
    MutexLock l(&impl_->mu);
    if (!impl_->free.empty()) {
      std::unique_ptr<Buffer> b = std::move(impl_->free.back());
      impl_->free.pop_back();
      return b;
    }
  }
  // Huge pages where THP allows, so that an O_DIRECT read into it is a
  // couple of device segments, not one per 4 KiB page (os/mem/page_backing.hpp).
  constexpr size_t kHuge = 2u << 20;
  auto b = std::make_unique<Buffer>();
  CAIRN_ASSIGN_OR_RETURN(b->map, os::Mapping::Create(kStagingBytes + kHuge, {.huge_pages = true}));
  const auto base = reinterpret_cast<uintptr_t>(b->map.data());
  b->data = b->map.data() + ((kHuge - base % kHuge) % kHuge);
  return b;
}

void StagingPool::Give(std::unique_ptr<Buffer> b) {
  if (!b) return;
  MutexLock l(&impl_->mu);
  impl_->free.push_back(std::move(b));
}

uint8_t* StagingPool::Data(const Buffer& b) { return b.data; }

namespace {

// A worker's staging buffer for one ReadBlocks call, from the caller's pool
// (given back at the end of the call) or from a pool of its own.
class Staging {
 public:
  explicit Staging(StagingPool* pool) : pool_(pool != nullptr ? pool : &own_) {}
  ~Staging() { pool_->Give(std::move(buffer_)); }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  explicit operator bool() const { return buffer_ != nullptr; }
  uint8_t* get() const { return StagingPool::Data(*buffer_); }
  Status Allocate() {
    CAIRN_ASSIGN_OR_RETURN(buffer_, pool_->Take());
    return Status::Ok();
  }

 private:
  StagingPool own_;  // used when the caller gave no pool
  StagingPool* const pool_;
  std::unique_ptr<StagingPool::Buffer> buffer_;
};

// The shared state of one ReadBlocks call.
class ReadRun {
 public:
  ReadRun(os::FileSystem* fs, const FileReader& file, std::span<const BlockRead> plan,
          const CopyOutFn& copy_out, bool direct, StagingPool* pool)
      : fs_(fs), file_(file), plan_(plan), copy_out_(copy_out), direct_(direct), pool_(pool) {}

  // One worker: opens the file, then reads blocks until none is left or
  // another worker failed.
  void Work() CAIRN_EXCLUDES(mu_, copy_mu_);

  Status result() CAIRN_EXCLUDES(mu_) {
    MutexLock l(&mu_);
    return error_;
  }

 private:
  // The file opened for this worker: O_DIRECT when asked and allowed.
  Result<std::unique_ptr<os::File>> OpenFile();
  Status ReadOne(os::File& f, Staging& staging, const BlockRead& r) CAIRN_EXCLUDES(copy_mu_);
  Status ReadStaged(os::File& f, Staging& staging, const BlockRead& r) CAIRN_EXCLUDES(copy_mu_);
  void Fail(size_t at, Status s) CAIRN_EXCLUDES(mu_);
  Status CopyOut(bool host, void* dst, const void* src, size_t n) CAIRN_EXCLUDES(copy_mu_);

  os::FileSystem* const fs_;
  const FileReader& file_;
  const std::span<const BlockRead> plan_;
  const CopyOutFn& copy_out_;
  const bool direct_;
  StagingPool* const pool_;  // null: each worker maps its own
  std::atomic<size_t> next_{0};     // the next plan entry to claim
  std::atomic<bool> stop_{false};   // a worker failed: claim no more
  Mutex mu_;
  size_t error_at_ CAIRN_GUARDED_BY(mu_) = std::numeric_limits<size_t>::max();
  Status error_ CAIRN_GUARDED_BY(mu_);
  Mutex copy_mu_;  // serializes copy_out_
};

Result<std::unique_ptr<os::File>> ReadRun::OpenFile() {
  if (direct_) {
    auto f = fs_->Open(file_.path(), os::OpenOptions{.direct = true});
    if (f.status().code() != Code::kUnsupported) return f;
  }
  return fs_->Open(file_.path(), os::OpenOptions{});
}

void ReadRun::Fail(size_t at, Status s) {
  stop_.store(true, std::memory_order_relaxed);
  MutexLock l(&mu_);
  if (at < error_at_) {
    error_at_ = at;
    error_ = std::move(s);
  }
}

void ReadRun::Work() {
  auto f = OpenFile();
  if (!f.ok()) return Fail(0, f.status());
  Staging staging(pool_);
  while (!stop_.load(std::memory_order_relaxed)) {
    const size_t k = next_.fetch_add(1, std::memory_order_relaxed);
    if (k >= plan_.size()) return;
    Status s = ReadOne(**f, staging, plan_[k]);
    if (!s.ok()) return Fail(k, std::move(s));
  }
}

Status ReadRun::ReadOne(os::File& f, Staging& staging, const BlockRead& r) {
  if (r.block >= file_.layout().blocks.size()) {
    return Status::InvalidArgument(file_.path() + ": block " + std::to_string(r.block) +
                                   " out of range");
  }
  const Layout::Block& b = file_.layout().blocks[r.block];
  auto* dst = static_cast<uint8_t*>(r.dst);
  if (!r.pieces.empty() || !r.host || (f.direct() && (r.stage || !DirectOk(dst, b.length)))) {
    return ReadStaged(f, staging, r);
  }
  // Straight into the destination, piece by piece so that each piece is
  // checksummed while it is still in the CPU cache.
  uint32_t crc = 0;
  for (uint64_t done = 0; done < b.length;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kStagingBytes, b.length - done));
    CAIRN_RETURN_IF_ERROR(f.ReadAt(dst + done, n, b.offset + done));
    crc = crc32c::Extend(crc, dst + done, n);
    done += n;
  }
  return file_.CheckBlockCrc(r.block, crc);
}

// Through the staging buffer: for direct reads into unaligned memory (the
// read is rounded up to 4 KiB; the padding after a block's payload is part of
// the file, docs/format.md 2.3) and for device or managed destinations.
Status ReadRun::ReadStaged(os::File& f, Staging& staging, const BlockRead& r) {
  if (!staging) {
    Status s = staging.Allocate();
    if (!s.ok()) return s.WithContext(file_.path() + ": the read's staging buffer");
  }
  const Layout::Block& b = file_.layout().blocks[r.block];
  auto* dst = static_cast<uint8_t*>(r.dst);
  uint32_t crc = 0;
  for (uint64_t done = 0; done < b.length;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kStagingBytes, b.length - done));
    const size_t io = f.direct() ? static_cast<size_t>(AlignUp(n)) : n;
    CAIRN_RETURN_IF_ERROR(f.ReadAt(staging.get(), io, b.offset + done));
    crc = crc32c::Extend(crc, staging.get(), n);
    if (r.pieces.empty()) {
      CAIRN_RETURN_IF_ERROR(CopyOut(r.host, dst + done, staging.get(), n));
    } else {
      for (const ScatterPiece& p : r.pieces) {  // the parts of p inside [done, done + n)
        const uint64_t lo = std::max<uint64_t>(p.offset, done);
        const uint64_t hi = std::min<uint64_t>(uint64_t{p.offset} + p.bytes, done + n);
        if (lo >= hi) continue;
        CAIRN_RETURN_IF_ERROR(CopyOut(r.host, static_cast<uint8_t*>(p.dst) + (lo - p.offset),
                                      staging.get() + (lo - done), hi - lo));
      }
    }
    done += n;
  }
  return file_.CheckBlockCrc(r.block, crc);
}

Status ReadRun::CopyOut(bool host, void* dst, const void* src, size_t n) {
  if (host) {
    std::memcpy(dst, src, n);
    return Status::Ok();
  }
  if (!copy_out_) return Status::Internal("ReadBlocks: a device destination without copy_out");
  MutexLock l(&copy_mu_);
  return copy_out_(dst, src, n);
}

}  // namespace

Status ReadBlocks(os::FileSystem* fs, const FileReader& file, std::span<const BlockRead> plan,
                  const CopyOutFn& copy_out, const ReadBlocksOptions& options) {
  if (fs == nullptr) return Status::InvalidArgument("ReadBlocks: no file system");
  if (plan.empty()) return Status::Ok();
  ReadRun run(fs, file, plan, copy_out, options.direct, options.staging);
  RunWorkers(std::clamp<size_t>(options.queue_depth, 1, plan.size()), [&run] { run.Work(); });
  return run.result();
}

void RunWorkers(size_t workers, const std::function<void()>& work) {
  std::vector<std::jthread> helpers;
  if (workers > 1) helpers.reserve(workers - 1);
  for (size_t i = 1; i < workers; ++i) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no thread to spare: fewer in flight, same result
    }
  }
  work();
}  // joins the helpers

}  // namespace cairn::format
