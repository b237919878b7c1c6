#include "os/fs/node_lock.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace cairn::os {
namespace {

Status LockError(const std::string& what, const std::string& path, int err) {
  return Status::Io("node lock " + path + ": " + what + ": " + std::strerror(err));
}

Status HeldElsewhere(const std::string& path) {
  return Status::State("node lock " + path + " is held by another process");
}

// Closes a descriptor on every path out of a scope.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// Queue entries are named by their ticket in 20 zero-padded digits, so that
// a listing sorts like the tickets; anything else in the directory is
// ignored.
constexpr size_t kTicketDigits = 20;

std::string EntryName(uint64_t ticket) {
  char name[kTicketDigits + 1];
  std::snprintf(name, sizeof name, "%020" PRIu64, ticket);
  return name;
}

std::optional<uint64_t> ParseTicket(const char* name) {
  if (std::strlen(name) != kTicketDigits) return std::nullopt;
  uint64_t ticket = 0;
  for (const char* c = name; *c != '\0'; ++c) {
    if (*c < '0' || *c > '9') return std::nullopt;
    const uint64_t digit = static_cast<uint64_t>(*c - '0');
    if (ticket > (UINT64_MAX - digit) / 10) return std::nullopt;
    ticket = ticket * 10 + digit;
  }
  return ticket;
}

// The tickets queued in `dir`, ascending.
Result<std::vector<uint64_t>> ListTickets(const std::string& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) return LockError("cannot open the queue directory", dir, errno);
  std::vector<uint64_t> tickets;
  for (;;) {
    errno = 0;
    const dirent* e = ::readdir(d.get());
    if (e == nullptr) break;
    if (auto t = ParseTicket(e->d_name)) tickets.push_back(*t);
  }
  if (errno != 0) return LockError("cannot read the queue directory", dir, errno);
  std::sort(tickets.begin(), tickets.end());
  return tickets;
}

// One non-blocking flock(`operation` | LOCK_NB) of `fd` (the file at
// `path`): true when taken, false when another open file description holds
// a conflicting lock.
Result<bool> TryFlock(int fd, int operation, const std::string& path) {
  for (;;) {
    if (::flock(fd, operation | LOCK_NB) == 0) return true;
    const int err = errno;
    if (err == EINTR) continue;
    if (err == EWOULDBLOCK) return false;
    return LockError("flock failed", path, err);
  }
}

// Takes `fd`'s exclusive flock, polling every `poll` until `give_up()`.
Status PollFlock(int fd, const std::string& path, const std::function<bool()>& give_up,
                 std::chrono::microseconds poll) {
  for (;;) {
    CAIRN_ASSIGN_OR_RETURN(bool taken, TryFlock(fd, LOCK_EX, path));
    if (taken) return Status::Ok();
    if (give_up && give_up()) return HeldElsewhere(path);
    std::this_thread::sleep_for(poll);
  }
}

// Whether the entry of `ticket` belongs to a live process, i.e. is locked.
// An unlocked entry's owner died: the entry is removed. A missing one's owner
// has left the queue.
Result<bool> EntryIsLive(const std::string& dir, uint64_t ticket) {
  const std::string entry = dir + "/" + EntryName(ticket);
  ScopedFd fd(::open(entry.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return false;
    return LockError("cannot open a queue entry", entry, errno);
  }
  CAIRN_ASSIGN_OR_RETURN(bool owner_gone, TryFlock(fd.get(), LOCK_SH, entry));
  if (!owner_gone) return true;
  // Tickets are never reused (the admission file keeps the last one), so
  // this name cannot belong to a newer, live entry. ENOENT: another waiter
  // removed it first.
  (void)::unlink(entry.c_str());
  return false;
}

struct QueueEntry {
  int fd;
  std::string path;
  uint64_t ticket;
};

// Takes a ticket under the admission lock and creates and locks its entry
// before letting the admission lock go.
Result<QueueEntry> Enqueue(const std::string& path, const std::string& dir,
                           const std::function<bool()>& give_up, std::chrono::microseconds poll) {
  ScopedFd admission(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (admission.get() < 0) return LockError("cannot open", path, errno);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return LockError("cannot create the queue directory", dir, errno);
  }
  CAIRN_RETURN_IF_ERROR(PollFlock(admission.get(), path, give_up, poll));
  // The last ticket handed out, in native byte order (the file never leaves
  // the node); a new or empty file reads as 0. The largest ticket still
  // queued counts too, should the file have been removed and recreated.
  uint64_t last = 0;
  if (::pread(admission.get(), &last, sizeof last, 0) != static_cast<ssize_t>(sizeof last))
    last = 0;
  // No run hands out 2^63 tickets: such a value is some other file's bytes,
  // and counting on from it could wrap around below live tickets.
  if (last > (UINT64_MAX >> 1)) last = 0;
  CAIRN_ASSIGN_OR_RETURN(std::vector<uint64_t> queued, ListTickets(dir));
  if (!queued.empty()) last = std::max(last, queued.back());
  for (uint64_t ticket = last + 1;; ++ticket) {
    const std::string entry = dir + "/" + EntryName(ticket);
    ScopedFd fd(::open(entry.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (fd.get() < 0) {
      if (errno == EEXIST && ticket - last < 1000) continue;  // a stray file of that name
      return LockError("cannot create a queue entry", entry, errno);
    }
    // A new file: nobody else can hold its lock.
    const Result<bool> locked = TryFlock(fd.get(), LOCK_EX, entry);
    if (!locked.ok() || !locked.value()) {
      (void)::unlink(entry.c_str());
      return locked.ok() ? LockError("flock failed", entry, EWOULDBLOCK) : locked.status();
    }
    if (::pwrite(admission.get(), &ticket, sizeof ticket, 0) !=
        static_cast<ssize_t>(sizeof ticket)) {
      const int err = errno;
      (void)::unlink(entry.c_str());
      return LockError("cannot record the last ticket", path, err);
    }
    return QueueEntry{fd.release(), entry, ticket};
  }
}

// Whether no live process is queued before `ticket`. Looks from the nearest
// ticket down and stops at the first live one: while waiting, one check per
// poll.
Result<bool> FirstInQueue(const std::string& dir, uint64_t ticket) {
  CAIRN_ASSIGN_OR_RETURN(std::vector<uint64_t> queued, ListTickets(dir));
  for (auto it = std::lower_bound(queued.begin(), queued.end(), ticket); it != queued.begin();) {
    --it;
    CAIRN_ASSIGN_OR_RETURN(bool live, EntryIsLive(dir, *it));
    if (live) return false;
  }
  return true;
}

}  // namespace

std::string NodeLockQueueDir(const std::string& path) { return path + ".queue"; }

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

NodeLock::NodeLock(NodeLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), entry_(std::move(other.entry_)) {}

NodeLock& NodeLock::operator=(NodeLock&& other) noexcept {
  if (this != &other) {
    Release();
    fd_ = std::exchange(other.fd_, -1);
    entry_ = std::move(other.entry_);
  }
  return *this;
}

void NodeLock::Release() {
  if (fd_ < 0) return;
  // Unlink before closing: a live entry is never seen unlocked under its
  // name. (Were this process to die here, the entry would stay, unlocked,
  // and the next waiter would remove it.)
  (void)::unlink(entry_.c_str());
  ::close(std::exchange(fd_, -1));
  entry_.clear();
}

Result<NodeLock> NodeLock::TryAcquire(const std::string& path) {
  return Acquire(path, [] { return true; });
}

Result<NodeLock> NodeLock::Acquire(const std::string& path, const std::function<bool()>& give_up,
                                   std::chrono::microseconds poll) {
  const std::string dir = NodeLockQueueDir(path);
  CAIRN_ASSIGN_OR_RETURN(QueueEntry entry, Enqueue(path, dir, give_up, poll));
  NodeLock lock;  // from here on, every way out leaves the queue (Release)
  lock.fd_ = entry.fd;
  lock.entry_ = std::move(entry.path);
  for (;;) {
    CAIRN_ASSIGN_OR_RETURN(bool first, FirstInQueue(dir, entry.ticket));
    if (first) return lock;
    if (give_up && give_up()) return HeldElsewhere(path);
    std::this_thread::sleep_for(poll);
  }
}

}  // namespace cairn::os
