// Bundles read piecewise and files written piecewise (bundle_stream.hpp).
#include "redundancy/bundle_stream.hpp"

#include <unistd.h>  // getpid: temp file names (docs/format.md, 3.3)

#include <algorithm>
#include <cstring>

#include "redundancy/redundancy.hpp"
#include "format/chain.hpp"
#include "format/naming.hpp"
#include "os/fs/fs.hpp"

namespace cairn::redundancy {

BundleReader::~BundleReader() = default;

Result<std::unique_ptr<BundleReader>> BundleReader::Open(const Config& c, const std::string& dir,
                                                         const std::string& name, int64_t version,
                                                         Checkpoints* cache) {
  CAIRN_ASSIGN_OR_RETURN(format::Chain chain, format::Chain::Open(Fs(c), dir, name, version));
  std::unique_ptr<BundleReader> r(new BundleReader());
  r->cache_ = cache;
  r->name_ = name;
  Put(&r->heads_, static_cast<int64_t>(chain.links().size()));
  size_t head = 0;  // the count goes with the first file's head
  for (const auto& link : chain.links()) {
    const std::string& path = link->path();
    auto parsed = format::ParseEntryFileName(path.substr(path.rfind('/') + 1));
    if (!parsed) return Status::Internal(path + ": not a version file name");
    CAIRN_ASSIGN_OR_RETURN(auto file, Fs(c)->Open(path, os::OpenOptions{}));
    CAIRN_ASSIGN_OR_RETURN(uint64_t bytes, file->Size());
    Put(&r->heads_, parsed->number);
    Put(&r->heads_, static_cast<int64_t>(bytes));
    r->segments_.push_back(
        {.at = r->size_, .bytes = r->heads_.size() - head, .file = nullptr, .head = head});
    r->size_ += r->heads_.size() - head;
    head = r->heads_.size();
    r->files_.push_back(std::move(file));
    r->segments_.push_back(
        {.at = r->size_, .bytes = bytes, .file = r->files_.back().get(), .number = parsed->number});
    r->size_ += bytes;
  }
  return r;
}

Status BundleReader::Gather(uint64_t offset, uint8_t* dst, size_t n, const FileFn& file_part) {
  const uint64_t end = offset + n;
  if (end > size_)
    std::memset(dst + (std::max(offset, size_) - offset), 0, end - std::max(offset, size_));
  for (auto it = SegmentAt(offset); it != segments_.end() && it->at < end; ++it) {
    const uint64_t from = std::max(offset, it->at), to = std::min(end, it->at + it->bytes);
    if (from >= to) continue;
    uint8_t* out = dst + (from - offset);
    if (it->file == nullptr) {
      std::memcpy(out, heads_.data() + it->head + (from - it->at), to - from);
    } else {
      CAIRN_RETURN_IF_ERROR(file_part(*it, from - it->at, out, to - from));
    }
  }
  return Status::Ok();
}

Status BundleReader::Read(uint64_t offset, uint8_t* dst, size_t n) {
  return Gather(offset, dst, n, [](const Segment& s, uint64_t at, uint8_t* out, uint64_t bytes) {
    return s.file->ReadAt(out, bytes, at);
  });
}

std::vector<BundleReader::Segment>::iterator BundleReader::SegmentAt(uint64_t offset) {
  auto it = std::upper_bound(segments_.begin(), segments_.end(), offset,
                             [](uint64_t at, const Segment& s) { return at < s.at; });
  return it == segments_.begin() ? it : --it;
}

const uint8_t* BundleReader::View(uint64_t offset, size_t n) {
  const auto it = SegmentAt(offset);
  if (it == segments_.end() || it->at > offset) return nullptr;
  Segment& s = *it;
  if (s.file == nullptr || offset + n > s.at + s.bytes || s.unmapped) return nullptr;
  if (s.view == nullptr) {
    auto view = s.file->Map();
    s.unmapped = !view.ok();
    if (s.unmapped) return nullptr;
    s.view = std::move(view).value();
  }
  auto bytes = s.view->Bytes(offset - s.at, n);
  return bytes.ok() ? *bytes : nullptr;
}

bool BundleReader::FromCache(uint64_t offset, uint8_t* dst, size_t n) {
  if (cache_ == nullptr) return false;
  return Gather(offset, dst, n, [this](const Segment& s, uint64_t at, uint8_t* out, uint64_t bytes) {
           return cache_->CopyCached(name_, s.number, at, bytes, out).empty()
                      ? Status::Ok()
                      : Status::NotFound("not all in the host cache");
         }).ok();
}

void BundleReader::WillNeed(uint64_t offset, size_t n) {
  const auto it = SegmentAt(offset);
  if (it == segments_.end() || it->at > offset || it->view == nullptr) return;
  const uint64_t in = offset - it->at;
  if (in < it->bytes) it->view->WillNeed(in, std::min<uint64_t>(n, it->bytes - in));
}

Result<std::unique_ptr<PendingFile>> PendingFile::Create(const Config& c, const std::string& dir,
                                                         const std::string& file) {
  CAIRN_RETURN_IF_ERROR(Fs(c)->CreateDirs(dir, 0700).WithContext("writing " + dir + "/" + file));
  std::unique_ptr<PendingFile> p(
      new PendingFile(c, dir, file, dir + "/." + file + "." + std::to_string(::getpid()) + ".tmp"));
  auto out = os::OpenPreferringDirect(
      Fs(c), p->tmp_, os::OpenOptions{.write = true, .direct = c.direct_io, .mode = c.file_mode});
  if (!out.ok()) return out.status().WithContext("writing " + dir + "/" + file);
  p->out_ = std::move(*out);
  p->writer_ = std::make_unique<os::AlignedWriter>(p->out_.get());
  return p;
}

PendingFile::~PendingFile() {
  if (committed_) return;
  if (out_ != nullptr) (void)out_->Close();
  (void)Fs(config_)->Remove(tmp_);
}

Status PendingFile::WriteAt(const uint8_t* data, size_t n, uint64_t offset) {
  CAIRN_RETURN_IF_ERROR(
      writer_->WriteAt(data, n, offset).WithContext("writing " + dir_ + "/" + file_));
  // Written piecewise, the file goes to the device as it grows: Commit's
  // one fsync then waits for the last pieces only. A hint: its failure
  // (a file system without it) changes nothing that Commit checks.
  if (config_.fsync && !out_->direct()) (void)out_->StartWriteback(offset, n);
  return Status::Ok();
}

Status PendingFile::Commit() {
  os::FileSystem* fs = Fs(config_);
  Status s = [&]() -> Status {
    CAIRN_RETURN_IF_ERROR(writer_->Finish());
    if (config_.fsync) CAIRN_RETURN_IF_ERROR(out_->Sync());
    CAIRN_RETURN_IF_ERROR(out_->Close());
    CAIRN_RETURN_IF_ERROR(fs->Rename(tmp_, dir_ + "/" + file_));
    committed_ = true;
    return config_.fsync ? fs->SyncDir(dir_) : Status::Ok();
  }();
  return s.WithContext("writing " + dir_ + "/" + file_);
}

Status BundleWriter::Append(const uint8_t* data, size_t n) {
  return parser_.Append(data, n, *this);
}

Status BundleWriter::File(int64_t number, uint64_t) {
  CAIRN_ASSIGN_OR_RETURN(
      auto file, PendingFile::Create(
                     config_, dir_, format::EntryFileName(format::EntryKind::kCheckpoint, number)));
  files_.push_back(std::move(file));
  return Status::Ok();
}

Status BundleWriter::Content(const uint8_t* data, size_t n, uint64_t offset) {
  return files_.back()->WriteAt(data, n, offset);
}

Status BundleWriter::Commit() {
  CAIRN_RETURN_IF_ERROR(parser_.Finish());
  for (auto it = files_.rbegin(); it != files_.rend(); ++it) CAIRN_RETURN_IF_ERROR((*it)->Commit());
  return Status::Ok();
}

}  // namespace cairn::redundancy
