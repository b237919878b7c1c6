// A lost member's rebuilt bundle as it streams in (rebuilt_sink.hpp).
#include "redundancy/parity/rebuilt_sink.hpp"

#include <unistd.h>  // getpid: the spool's name

#include <algorithm>
#include <cstring>
#include <vector>

#include "format/naming.hpp"
#include "redundancy/bundle_exchange.hpp"
#include "redundancy/redundancy.hpp"

namespace cairn::parity::impl {

Status Sink::Begin(const Config& c, const std::string& dir, int64_t v, const uint8_t* first,
                   uint64_t n, uint64_t total) {
  int64_t head[3] = {0, -1, -1};  // count, number, bytes
  if (n >= kHead) std::memcpy(head, first, kHead);
  total_ = total;
  if (head[0] == 1 && head[1] == v && head[2] >= 0 &&
      static_cast<uint64_t>(head[2]) + kHead == total) {
    CAIRN_ASSIGN_OR_RETURN(file_,
                           redundancy::PendingFile::Create(
                               c, dir, format::EntryFileName(format::EntryKind::kCheckpoint, v)));
    return Status::Ok();
  }
  os::FileSystem* fs = redundancy::Fs(c);
  const std::string path =
      dir + "/.v" + std::to_string(v) + ".bundle." + std::to_string(::getpid()) + ".tmp";
  CAIRN_RETURN_IF_ERROR(fs->CreateDirs(dir, 0700).WithContext("spooling a rebuilt chain"));
  auto spool = fs->Open(path, os::OpenOptions{.write = true, .mode = 0600});
  if (!spool.ok()) return spool.status().WithContext("spooling a rebuilt chain");
  spool_ = std::move(*spool);
  // Unlinked at once: the open file is all that is needed, and a crash
  // leaves nothing behind.
  return fs->Remove(path).WithContext("spooling a rebuilt chain");
}

Status Sink::Place(const uint8_t* data, uint64_t at, uint64_t n) {
  if (spool_ != nullptr) return spool_->WriteAt(data, n, at);
  if (at + n <= kHead) return Status::Ok();
  const uint64_t from = std::max(at, kHead);
  return file_->WriteAt(data + (from - at), at + n - from, from - kHead);
}

Status Sink::Commit(const Config& c, const std::string& dir, const std::string& from) {
  if (file_ != nullptr) return file_->Commit();
  // The spooled chain, read back in order into its files.
  redundancy::BundleWriter out(c, dir, from, total_);
  std::vector<uint8_t> window(
      static_cast<size_t>(std::min<uint64_t>(total_, redundancy::kBundleWindow)));
  for (uint64_t at = 0; at < total_; at += window.size()) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(window.size(), total_ - at));
    CAIRN_RETURN_IF_ERROR(
        spool_->ReadAt(window.data(), n, at).WithContext("reading back a rebuilt chain"));
    CAIRN_RETURN_IF_ERROR(out.Append(window.data(), n));
  }
  spool_.reset();
  return out.Commit();
}

}  // namespace cairn::parity::impl
