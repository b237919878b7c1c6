#include "os/node_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

namespace cairn::os {
namespace {

Status LockError(const std::string& what, const std::string& path, int err) {
  return Status::Io("node lock " + path + ": " + what + ": " + std::strerror(err));
}

// Opens (creating) the lock file. O_CLOEXEC: a child exec'd by the
// application must not inherit (and so keep holding) the lock.
Result<int> OpenLockFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return LockError("cannot open", path, errno);
  return fd;
}

}  // namespace

std::string DefaultPinLockPath() {
  const std::string file = "cairn-pin-" + std::to_string(::getuid()) + ".lock";
  struct stat st {};
  if (::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && ::access("/dev/shm", W_OK) == 0) {
    return "/dev/shm/" + file;
  }
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/" + file;
}

NodeLock::~NodeLock() { Release(); }

NodeLock::NodeLock(NodeLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

NodeLock& NodeLock::operator=(NodeLock&& other) noexcept {
  if (this != &other) {
    Release();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void NodeLock::Release() {
  // Closing the only descriptor of the open file description drops the lock.
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
}

Result<NodeLock> NodeLock::TryAcquire(const std::string& path) {
  return Acquire(path, [] { return true; });
}

Result<NodeLock> NodeLock::Acquire(const std::string& path, const std::function<bool()>& give_up,
                                   std::chrono::microseconds poll) {
  CAIRN_ASSIGN_OR_RETURN(int fd, OpenLockFile(path));
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) break;
    const int err = errno;
    if (err == EINTR) continue;
    if (err != EWOULDBLOCK) {
      ::close(fd);
      return LockError("flock failed", path, err);
    }
    if (give_up && give_up()) {
      ::close(fd);
      return Status::State("node lock " + path + " is held by another process");
    }
    std::this_thread::sleep_for(poll);
  }
  NodeLock lock;
  lock.fd_ = fd;
  return lock;
}

}  // namespace cairn::os
