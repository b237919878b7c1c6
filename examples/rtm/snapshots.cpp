#include "snapshots.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace rtm {

// ---- Cairn ------------------------------------------------------------------

cairn::Result<std::unique_ptr<CairnStore>> CairnStore::Open(const std::string& scratch_dir,
                                                            uint64_t host_cache_bytes,
                                                            const std::string& trace_path) {
  cairn::Config config = cairn::DefaultConfig();
  config.scratch_dir = scratch_dir;
  config.host_cache_bytes = host_cache_bytes;
  config.trace_path = trace_path;
  CAIRN_RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<CairnStore> store(new CairnStore());
  CAIRN_ASSIGN_OR_RETURN(store->client_, cairn::Client::Open(config));
  CAIRN_ASSIGN_OR_RETURN(store->history_, store->client_->OpenHistory("rtm"));
  return store;
}

CairnStore::~CairnStore() { (void)Close(); }

cairn::Status CairnStore::Push(int64_t step, const void* data, size_t bytes) {
  return history_->Push(step, data, bytes);
}

cairn::Status CairnStore::Pop(int64_t step, void* dst, size_t bytes) {
  CAIRN_ASSIGN_OR_RETURN(size_t got, history_->Pop(step, dst, bytes));
  if (got != bytes) {
    return cairn::Status::SizeMismatch("snapshot " + std::to_string(step) + " has " +
                                       std::to_string(got) + " bytes, expected " +
                                       std::to_string(bytes));
  }
  return cairn::Status::Ok();
}

cairn::Status CairnStore::Close() {
  cairn::Status first;
  if (history_) {
    first = history_->Close();
    history_.reset();
  }
  if (client_) {
    cairn::Status s = client_->Close();
    if (first.ok()) first = s;
  }
  return first;  // the client is kept so GetStats() still works
}

// ---- Sync baseline ------------------------------------------------------------

namespace {
cairn::Status Errno(const std::string& what, const std::string& path) {
  return cairn::Status::Io(what + " " + path + ": " + std::strerror(errno));
}
}  // namespace

cairn::Result<std::unique_ptr<SyncStore>> SyncStore::Open(const std::string& dir, bool fsync) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return cairn::Status::Io("create " + dir + ": " + ec.message());
  return std::unique_ptr<SyncStore>(new SyncStore(dir, fsync));
}

SyncStore::~SyncStore() { (void)Close(); }

std::string SyncStore::Path(int64_t step) const {
  return dir_ + "/snap-" + std::to_string(step) + ".bin";
}

cairn::Status SyncStore::Push(int64_t step, const void* data, size_t bytes) {
  const std::string path = Path(step);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("open", path);
  const char* p = static_cast<const char*>(data);
  size_t left = bytes;
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      cairn::Status s = Errno("write", path);
      ::close(fd);
      return s;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (fsync_ && ::fsync(fd) != 0) {
    cairn::Status s = Errno("fsync", path);
    ::close(fd);
    return s;
  }
  if (::close(fd) != 0) return Errno("close", path);
  written_ += bytes;
  return cairn::Status::Ok();
}

cairn::Status SyncStore::Pop(int64_t step, void* dst, size_t bytes) {
  const std::string path = Path(step);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? cairn::Status::NotFound(path) : Errno("open", path);
  char* p = static_cast<char*>(dst);
  size_t left = bytes;
  while (left > 0) {
    const ssize_t n = ::read(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      cairn::Status s = Errno("read", path);
      ::close(fd);
      return s;
    }
    if (n == 0) {
      ::close(fd);
      return cairn::Status::SizeMismatch(path + " is shorter than " + std::to_string(bytes));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::close(fd);
  if (::unlink(path.c_str()) != 0) return Errno("unlink", path);
  read_ += bytes;
  return cairn::Status::Ok();
}

cairn::Status SyncStore::Close() {
  // Remove whatever was not popped (an aborted run).
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string f = e.path().filename().string();
    if (f.rfind("snap-", 0) == 0) std::filesystem::remove(e.path(), ec);
  }
  return cairn::Status::Ok();
}

}  // namespace rtm
