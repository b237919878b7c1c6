#include "driver/sync_baseline.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "driver/bench.hpp"
#include "common/files.hpp"

namespace cairn::bench {
namespace {
constexpr size_t kPiece = 4u << 20;  // write size of the naive library
}

Result<SyncStore> SyncStore::Open(const std::string& dir, bool fsync, size_t staging_bytes) {
  CAIRN_RETURN_IF_ERROR(MakeDirs(dir));
  SyncStore store(dir, fsync);
  if (staging_bytes > 0) {
    CAIRN_ASSIGN_OR_RETURN(store.staging_, AllocateBuffer(staging_bytes));
    TouchPages(store.staging_.get(), staging_bytes);
    store.staging_bytes_ = staging_bytes;
  }
  return store;
}

Status SyncStore::Write(const std::string& name, const BenchBuffer& src, size_t n) {
  if (src.kind() != MemoryKind::kHost && n > staging_bytes_) {
    return Status::Internal("sync baseline: staging buffer too small");
  }
  CAIRN_ASSIGN_OR_RETURN(const uint8_t* data, src.Out(staging_.get(), n));
  return WriteHost(name, data, n);
}

Result<size_t> SyncStore::Read(const std::string& name, BenchBuffer& dst, size_t capacity,
                               bool consume) {
  if (dst.kind() == MemoryKind::kHost) return ReadHost(name, dst.app(), capacity, consume);
  CAIRN_ASSIGN_OR_RETURN(size_t got,
                         ReadHost(name, staging_.get(), std::min(capacity, staging_bytes_), consume));
  CAIRN_RETURN_IF_ERROR(dst.In(staging_.get(), got));
  return got;
}

Status SyncStore::WriteHost(const std::string& name, const void* data, size_t n) {
  const std::string path = Path(name);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(errno, "open", path);
  const auto* p = static_cast<const uint8_t*>(data);
  const Clock::time_point t0 = Clock::now();
  Status st;
  for (size_t off = 0; off < n && st.ok(); off += kPiece) {
    st = WriteAll(fd, p + off, std::min(kPiece, n - off), off, path);
  }
  if (st.ok() && fsync_ && ::fsync(fd) != 0) st = ErrnoStatus(errno, "fsync", path);
  write_s_ += Seconds(t0, Clock::now());
  if (::close(fd) != 0 && st.ok()) st = ErrnoStatus(errno, "close", path);
  if (st.ok()) written_ += n;
  return st;
}

Result<size_t> SyncStore::ReadHost(const std::string& name, void* dst, size_t capacity,
                                   bool consume) {
  const std::string path = Path(name);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open", path);
  struct stat sb {};
  if (::fstat(fd, &sb) != 0) {
    Status st = ErrnoStatus(errno, "stat", path);
    ::close(fd);
    return st;
  }
  const auto size = static_cast<size_t>(sb.st_size);
  if (size > capacity) {
    ::close(fd);
    return Status::SizeMismatch(path + ": " + std::to_string(size) + " bytes, buffer holds " +
                                std::to_string(capacity));
  }
  Result<size_t> r = ReadAll(fd, dst, size, 0, path);
  ::close(fd);
  if (!r.ok()) return r.status();
  if (*r != size) return Status::Io("read " + path + ": file shrank while reading");
  if (consume && ::unlink(path.c_str()) != 0) return ErrnoStatus(errno, "unlink", path);
  return size;
}

Status SyncStore::Remove(const std::string& name) {
  const std::string path = Path(name);
  if (::unlink(path.c_str()) != 0) return ErrnoStatus(errno, "unlink", path);
  return Status::Ok();
}

Result<std::vector<std::string>> SyncStore::List() const {
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return ErrnoStatus(errno, "opendir", dir_);
  std::vector<std::string> names;
  errno = 0;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  const int err = errno;
  ::closedir(d);
  if (err != 0) return ErrnoStatus(err, "readdir", dir_);
  return names;
}

}  // namespace cairn::bench
