#include "testing/fs/fault_fs.hpp"

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
  // inode: the file's identity in the power-loss model; 0 = not tracked.
  FaultFile(FaultFs* fs, std::unique_ptr<os::File> base, uint64_t inode)
      : fs_(fs), base_(std::move(base)), inode_(inode) {}

  Status WriteAt(const void* buf, size_t n, uint64_t offset) override {
    MutexLock m(&fs_->model_mu_);
    if (int err = fs_->PowerGateLocked(true, path()); err != 0) {
      return os::ErrnoStatus(err, "write", path());
    }
    int err = 0;
    size_t allowed = fs_->AdmitWrite(path(), n, direct(), &err);
    if (err != 0) return os::ErrnoStatus(err, "write", path());
    if (allowed > 0) {
      Status s = base_->WriteAt(buf, allowed, offset);
      if (!s.ok()) return s;
      if (inode_ != 0) fs_->model_.OnWrite(inode_, buf, allowed, offset);
      MutexLock l(&fs_->mu_);
      fs_->bytes_written_ += allowed;
    }
    if (allowed < n) return os::ErrnoStatus(ENOSPC, "write", path());
    return Status::Ok();
  }

  Status ReadAt(void* buf, size_t n, uint64_t offset) override {
    {
      MutexLock m(&fs_->model_mu_);
      if (int err = fs_->PowerGateLocked(false, path()); err != 0) {
        return os::ErrnoStatus(err, "read", path());
      }
    }
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
    MutexLock m(&fs_->model_mu_);
    if (int err = fs_->PowerGateLocked(true, path()); err != 0) {
      return os::ErrnoStatus(err, "fdatasync", path());
    }
    if (int err = fs_->Check(FaultOp::kSync, path()); err != 0) {
      return os::ErrnoStatus(err, "fdatasync", path());
    }
    // A tracked file's durability is the model's business: the disk's fsync
    // would only make the tests slow.
    if (fs_->model_.Tracks(path())) {
      if (inode_ != 0) fs_->model_.OnSync(inode_);
      return Status::Ok();
    }
    return base_->Sync();
  }

  Result<uint64_t> Size() override {
    {
      MutexLock m(&fs_->model_mu_);
      if (int err = fs_->PowerGateLocked(false, path()); err != 0) {
        return os::ErrnoStatus(err, "fstat", path());
      }
    }
    if (int err = fs_->Check(FaultOp::kSize, path()); err != 0) {
      return os::ErrnoStatus(err, "fstat", path());
    }
    return base_->Size();
  }

  Status Truncate(uint64_t size) override {
    MutexLock m(&fs_->model_mu_);
    if (int err = fs_->PowerGateLocked(true, path()); err != 0) {
      return os::ErrnoStatus(err, "ftruncate", path());
    }
    if (int err = fs_->Check(FaultOp::kTruncate, path()); err != 0) {
      return os::ErrnoStatus(err, "ftruncate", path());
    }
    Status s = base_->Truncate(size);
    if (s.ok() && inode_ != 0) fs_->model_.OnTruncate(inode_, size);
    return s;
  }

  // Closing is never failed: callers cannot do anything useful about it, and
  // a leaked descriptor would make later tests flaky.
  Status Close() override { return base_->Close(); }
  const std::string& path() const override { return base_->path(); }
  bool direct() const override { return base_->direct(); }

 private:
  FaultFs* const fs_;
  std::unique_ptr<os::File> base_;
  const uint64_t inode_;
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

int FaultFs::PowerGateLocked(bool mutating, const std::string& path, const std::string& path2) {
  if (!model_.Tracks(path) && (path2.empty() || !model_.Tracks(path2))) return 0;
  if (power_out_) return EIO;
  if (!mutating) return 0;
  ++mutations_;
  if (cut_at_ != 0 && mutations_ >= cut_at_) {
    power_out_ = true;
    return EIO;
  }
  return 0;
}

Status FaultFs::TrackPowerLoss(const std::string& root) {
  MutexLock m(&model_mu_);
  mutations_ = cut_at_ = 0;
  power_out_ = false;
  return model_.Start(base_, root);
}

void FaultFs::ArmPowerCut(uint64_t nth) {
  MutexLock m(&model_mu_);
  cut_at_ = mutations_ + std::max<uint64_t>(nth, 1);
}

bool FaultFs::power_cut() const {
  MutexLock m(&model_mu_);
  return power_out_;
}

uint64_t FaultFs::tracked_mutations() const {
  MutexLock m(&model_mu_);
  return mutations_;
}

size_t FaultFs::unsynced_changes() const {
  MutexLock m(&model_mu_);
  return model_.pending();
}

Status FaultFs::PowerLoss(Unsynced unsynced) {
  MutexLock m(&model_mu_);
  power_out_ = true;
  Status s = model_.PowerLoss(base_, unsynced);
  mutations_ = cut_at_ = 0;
  power_out_ = false;
  return s;
}

Result<std::unique_ptr<os::File>> FaultFs::Open(const std::string& path, const os::OpenOptions& options) {
  MutexLock m(&model_mu_);
  if (int err = PowerGateLocked(options.write, path); err != 0) {
    return os::ErrnoStatus(err, "open", path);
  }
  if (int err = Check(FaultOp::kOpen, path); err != 0) return os::ErrnoStatus(err, "open", path);
  auto file = base_->Open(path, options);
  if (!file.ok()) return file.status();
  const uint64_t inode = options.write && model_.Tracks(path) ? model_.OnOpenWrite(path, !options.in_place) : 0;
  return std::unique_ptr<os::File>(new FaultFile(this, std::move(file).value(), inode));
}

Status FaultFs::Rename(const std::string& from, const std::string& to) {
  MutexLock m(&model_mu_);
  const std::string both = from + " -> " + to;
  if (int err = PowerGateLocked(true, from, to); err != 0) {
    return os::ErrnoStatus(err, "rename", both);
  }
  if (int err = Check(FaultOp::kRename, from, to); err != 0) {
    return os::ErrnoStatus(err, "rename", both);
  }
  Status s = base_->Rename(from, to);
  if (s.ok() && model_.Tracks(to)) {
    model_.OnRename(from, to);
  } else if (s.ok() && model_.Tracks(from)) {
    model_.OnRemove(from);  // moved out of the tracked tree
  }
  return s;
}

Status FaultFs::Remove(const std::string& path) {
  MutexLock m(&model_mu_);
  if (int err = PowerGateLocked(true, path); err != 0) return os::ErrnoStatus(err, "unlink", path);
  if (int err = Check(FaultOp::kRemove, path); err != 0) {
    return os::ErrnoStatus(err, "unlink", path);
  }
  Status s = base_->Remove(path);
  if (s.ok() && model_.Tracks(path)) model_.OnRemove(path);
  return s;
}

Status FaultFs::CreateDirs(const std::string& path, uint32_t mode) {
  MutexLock m(&model_mu_);
  if (int err = PowerGateLocked(true, path); err != 0) return os::ErrnoStatus(err, "mkdir", path);
  if (int err = Check(FaultOp::kCreateDirs, path); err != 0) {
    return os::ErrnoStatus(err, "mkdir", path);
  }
  Status s = base_->CreateDirs(path, mode);
  if (s.ok() && model_.Tracks(path)) model_.OnCreateDirs(path);
  return s;
}

Status FaultFs::RemoveDir(const std::string& path) {
  MutexLock m(&model_mu_);
  if (int err = PowerGateLocked(true, path); err != 0) return os::ErrnoStatus(err, "rmdir", path);
  if (int err = Check(FaultOp::kRemoveDir, path); err != 0) {
    return os::ErrnoStatus(err, "rmdir", path);
  }
  Status s = base_->RemoveDir(path);
  if (s.ok() && model_.Tracks(path)) model_.OnRemoveDir(path);
  return s;
}

Status FaultFs::SyncDir(const std::string& path) {
  MutexLock m(&model_mu_);
  // The tracked root itself may be fsynced too (its entries are tracked).
  const std::string child = path + "/.";
  if (int err = PowerGateLocked(true, child); err != 0) {
    return os::ErrnoStatus(err, "fsync directory", path);
  }
  if (int err = Check(FaultOp::kSyncDir, path); err != 0) {
    return os::ErrnoStatus(err, "fsync directory", path);
  }
  if (model_.Tracks(child)) {  // as for files: the model decides, not the disk
    model_.OnSyncDir(path);
    return Status::Ok();
  }
  return base_->SyncDir(path);
}

Result<std::vector<os::DirEntry>> FaultFs::List(const std::string& path) {
  {
    MutexLock m(&model_mu_);
    if (int err = PowerGateLocked(false, path + "/."); err != 0) {
      return os::ErrnoStatus(err, "opendir", path);
    }
  }
  if (int err = Check(FaultOp::kList, path); err != 0) return os::ErrnoStatus(err, "opendir", path);
  return base_->List(path);
}

Result<os::FileInfo> FaultFs::Stat(const std::string& path) {
  {
    MutexLock m(&model_mu_);
    if (int err = PowerGateLocked(false, path); err != 0) return os::ErrnoStatus(err, "stat", path);
  }
  if (int err = Check(FaultOp::kStat, path); err != 0) return os::ErrnoStatus(err, "stat", path);
  return base_->Stat(path);
}

}  // namespace cairn::test
