#include "testing/fault_fs.hpp"

#include <algorithm>
#include <utility>

namespace cairn::test {
namespace {

bool Matches(const std::string& filter, const std::string& path) {
  return filter.empty() || path.find(filter) != std::string::npos;
}

}  // namespace

const char* FaultOpName(FaultOp op) {
  switch (op) {
    case FaultOp::kOpen: return "open";
    case FaultOp::kWrite: return "write";
    case FaultOp::kRead: return "read";
    case FaultOp::kSync: return "fdatasync";
    case FaultOp::kSize: return "fstat";
    case FaultOp::kTruncate: return "ftruncate";
    case FaultOp::kRename: return "rename";
    case FaultOp::kRemove: return "unlink";
    case FaultOp::kCreateDirs: return "mkdir";
    case FaultOp::kRemoveDir: return "rmdir";
    case FaultOp::kSyncDir: return "fsync directory";
    case FaultOp::kList: return "opendir";
    case FaultOp::kStat: return "stat";
    case FaultOp::kCount_: break;
  }
  return "?";
}

// Forwards to the base file, consulting the FaultFs around each call. The
// FaultFs outlives it (documented precondition).
class FaultFs::FaultFile final : public os::File {
 public:
  FaultFile(FaultFs* fs, std::unique_ptr<os::File> base) : fs_(fs), base_(std::move(base)) {}

  Status WriteAt(const void* buf, size_t n, uint64_t offset) override {
    int err = 0;
    size_t allowed = fs_->AdmitWrite(path(), n, direct(), &err);
    if (err != 0) return os::ErrnoStatus(err, "write", path());
    if (allowed > 0) {
      Status s = base_->WriteAt(buf, allowed, offset);
      if (!s.ok()) return s;
      MutexLock l(&fs_->mu_);
      fs_->bytes_written_ += allowed;
    }
    if (allowed < n) return os::ErrnoStatus(ENOSPC, "write", path());
    return Status::Ok();
  }

  Status ReadAt(void* buf, size_t n, uint64_t offset) override {
    if (int err = fs_->Check(FaultOp::kRead, path()); err != 0) {
      return os::ErrnoStatus(err, "read", path());
    }
    Status s = base_->ReadAt(buf, n, offset);
    if (!s.ok()) return s;
    if (fs_->ShouldCorruptRead(path(), n)) static_cast<uint8_t*>(buf)[0] ^= 0xff;
    MutexLock l(&fs_->mu_);
    fs_->bytes_read_ += n;
    return s;
  }

  Status Sync() override {
    if (int err = fs_->Check(FaultOp::kSync, path()); err != 0) {
      return os::ErrnoStatus(err, "fdatasync", path());
    }
    return base_->Sync();
  }

  Result<uint64_t> Size() override {
    if (int err = fs_->Check(FaultOp::kSize, path()); err != 0) {
      return os::ErrnoStatus(err, "fstat", path());
    }
    return base_->Size();
  }

  Status Truncate(uint64_t size) override {
    if (int err = fs_->Check(FaultOp::kTruncate, path()); err != 0) {
      return os::ErrnoStatus(err, "ftruncate", path());
    }
    return base_->Truncate(size);
  }

  // Closing is never failed: callers cannot do anything useful about it, and
  // a leaked descriptor would make later tests flaky.
  Status Close() override { return base_->Close(); }
  const std::string& path() const override { return base_->path(); }
  bool direct() const override { return base_->direct(); }

 private:
  FaultFs* const fs_;
  std::unique_ptr<os::File> base_;
};

FaultFs::FaultFs(os::FileSystem* base) : base_(base != nullptr ? base : os::FileSystem::Default()) {}
FaultFs::~FaultFs() = default;

void FaultFs::Inject(const Fault& fault) {
  MutexLock l(&mu_);
  ArmedFault armed;
  armed.fault = fault;
  if (armed.fault.nth == 0) armed.fault.nth = 1;
  faults_.push_back(std::move(armed));
}

void FaultFs::SetWriteBudget(uint64_t bytes, std::string path_filter) {
  MutexLock l(&mu_);
  budget_set_ = true;
  budget_left_ = bytes;
  budget_filter_ = std::move(path_filter);
}

void FaultFs::ClearWriteBudget() {
  MutexLock l(&mu_);
  budget_set_ = false;
  budget_left_ = 0;
  budget_filter_.clear();
}

void FaultFs::CorruptReads(std::string path_filter) {
  MutexLock l(&mu_);
  corrupt_reads_ = true;
  corrupt_filter_ = std::move(path_filter);
}

uint64_t FaultFs::calls(FaultOp op) const {
  MutexLock l(&mu_);
  return calls_[static_cast<size_t>(op)];
}

uint64_t FaultFs::bytes_written() const {
  MutexLock l(&mu_);
  return bytes_written_;
}

uint64_t FaultFs::bytes_read() const {
  MutexLock l(&mu_);
  return bytes_read_;
}

uint64_t FaultFs::faults_fired() const {
  MutexLock l(&mu_);
  return faults_fired_;
}

void FaultFs::Reset() {
  MutexLock l(&mu_);
  faults_.clear();
  calls_.fill(0);
  budget_set_ = false;
  budget_left_ = 0;
  budget_filter_.clear();
  corrupt_reads_ = false;
  corrupt_filter_.clear();
  bytes_written_ = bytes_read_ = faults_fired_ = 0;
}

int FaultFs::CheckLocked(FaultOp op, const std::string& path, const std::string& path2) {
  ++calls_[static_cast<size_t>(op)];
  int result = 0;
  // Every matching fault counts the call, even when an earlier one fires, so
  // that "the nth call" means the same thing whatever else is armed.
  for (ArmedFault& a : faults_) {
    const Fault& f = a.fault;
    if (f.op != op) continue;
    if (!Matches(f.path_filter, path) && (path2.empty() || !Matches(f.path_filter, path2))) continue;
    ++a.seen;
    bool due = a.seen >= f.nth && (f.times == 0 || a.fired < f.times);
    if (due && result == 0) {
      ++a.fired;
      result = f.err;
    }
  }
  if (result != 0) ++faults_fired_;
  return result;
}

int FaultFs::Check(FaultOp op, const std::string& path, const std::string& path2) {
  MutexLock l(&mu_);
  return CheckLocked(op, path, path2);
}

size_t FaultFs::AdmitWrite(const std::string& path, size_t n, bool direct, int* err) {
  MutexLock l(&mu_);
  *err = CheckLocked(FaultOp::kWrite, path, "");
  if (*err != 0 || !budget_set_ || !Matches(budget_filter_, path)) return n;
  uint64_t allowed = std::min<uint64_t>(n, budget_left_);
  if (allowed < n && direct) allowed -= allowed % os::kDirectIoAlignment;
  budget_left_ -= allowed;
  if (allowed < n) {
    ++faults_fired_;
    if (allowed == 0) *err = ENOSPC;  // nothing fits: fail without writing
  }
  return static_cast<size_t>(allowed);
}

bool FaultFs::ShouldCorruptRead(const std::string& path, size_t n) {
  MutexLock l(&mu_);
  return corrupt_reads_ && n > 0 && Matches(corrupt_filter_, path);
}

Result<std::unique_ptr<os::File>> FaultFs::Open(const std::string& path, const os::OpenOptions& options) {
  if (int err = Check(FaultOp::kOpen, path); err != 0) return os::ErrnoStatus(err, "open", path);
  auto file = base_->Open(path, options);
  if (!file.ok()) return file.status();
  return std::unique_ptr<os::File>(new FaultFile(this, std::move(file).value()));
}

Status FaultFs::Rename(const std::string& from, const std::string& to) {
  if (int err = Check(FaultOp::kRename, from, to); err != 0) {
    return os::ErrnoStatus(err, "rename", from + " -> " + to);
  }
  return base_->Rename(from, to);
}

Status FaultFs::Remove(const std::string& path) {
  if (int err = Check(FaultOp::kRemove, path); err != 0) return os::ErrnoStatus(err, "unlink", path);
  return base_->Remove(path);
}

Status FaultFs::CreateDirs(const std::string& path, uint32_t mode) {
  if (int err = Check(FaultOp::kCreateDirs, path); err != 0) return os::ErrnoStatus(err, "mkdir", path);
  return base_->CreateDirs(path, mode);
}

Status FaultFs::RemoveDir(const std::string& path) {
  if (int err = Check(FaultOp::kRemoveDir, path); err != 0) return os::ErrnoStatus(err, "rmdir", path);
  return base_->RemoveDir(path);
}

Status FaultFs::SyncDir(const std::string& path) {
  if (int err = Check(FaultOp::kSyncDir, path); err != 0) {
    return os::ErrnoStatus(err, "fsync directory", path);
  }
  return base_->SyncDir(path);
}

Result<std::vector<os::DirEntry>> FaultFs::List(const std::string& path) {
  if (int err = Check(FaultOp::kList, path); err != 0) return os::ErrnoStatus(err, "opendir", path);
  return base_->List(path);
}

Result<os::FileInfo> FaultFs::Stat(const std::string& path) {
  if (int err = Check(FaultOp::kStat, path); err != 0) return os::ErrnoStatus(err, "stat", path);
  return base_->Stat(path);
}

}  // namespace cairn::test
