// The POSIX FileSystem (os/fs/fs.hpp): thin loops around the system calls that
// absorb EINTR and short transfers, and turn errno into a Status that names
// the operation and the path. Every descriptor is opened O_CLOEXEC so that a
// fork+exec by the application (or MPI launcher) does not inherit it.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "os/fs/fs.hpp"
#include "os/mem/memory.hpp"  // PopulatePages

namespace cairn::os {
namespace {

// strerror_r comes in two flavours (XSI returns int, GNU returns char*);
// these overloads accept either without #ifdefs.
[[maybe_unused]] const char* StrerrorResult(int rc, const char* buf) {
  return rc == 0 ? buf : "unknown error";
}
[[maybe_unused]] const char* StrerrorResult(const char* msg, const char* /*buf*/) { return msg; }

std::string ErrnoText(int err) {
  char buf[256];
  buf[0] = '\0';
  return StrerrorResult(strerror_r(err, buf, sizeof(buf)), buf);
}

// A PosixFile's mapping (fs.hpp says what a FileView promises).
class PosixView final : public FileView {
 public:
  PosixView(const uint8_t* data, uint64_t size, std::string path)
      : data_(data), size_(size), path_(std::move(path)) {}
  ~PosixView() override { ::munmap(const_cast<uint8_t*>(data_), size_); }
  PosixView(const PosixView&) = delete;
  PosixView& operator=(const PosixView&) = delete;

  Result<const uint8_t*> Bytes(uint64_t offset, uint64_t n) override {
    if (offset > size_ || n > size_ - offset)
      return Status::InvalidArgument("mapping " + path_ + ": bytes " + std::to_string(offset) + " + " +
                                     std::to_string(n) + " lie past its end, " + std::to_string(size_));
    if (n == 0) return data_ + offset;
    int err;  // EINTR: a signal arrived while populating; asked again
    do {
      err = PopulatePages(data_ + offset, n, false);
    } while (err == EINTR);
    if (err == 0) return data_ + offset;
    if (err != EINVAL) return ErrnoStatus(err, "reading in", path_);
    return Status::Unsupported("mapping " + path_ + ": this kernel has no MADV_POPULATE_READ");
  }

  void WillNeed(uint64_t offset, uint64_t n) override {
    if (offset >= size_ || n == 0) return;
    n = std::min(n, size_ - offset);
    // madvise takes a page-aligned start: the page holding `offset`.
    const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const uint64_t from = offset / page * page;
    (void)::madvise(const_cast<uint8_t*>(data_) + from, n + (offset - from), MADV_WILLNEED);
  }

 private:
  const uint8_t* const data_;
  const uint64_t size_;
  const std::string path_;
};

class PosixFile final : public File {
 public:
  PosixFile(int fd, std::string path, bool direct) : fd_(fd), path_(std::move(path)), direct_(direct) {}
  ~PosixFile() override { (void)Close(); }

  Status WriteAt(const void* buf, size_t n, uint64_t offset) override {
    if (fd_ < 0) return Closed("write");
    const auto* p = static_cast<const char*>(buf);
    while (n > 0) {
      ssize_t w = ::pwrite(fd_, p, n, static_cast<off_t>(offset));
      if (w < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(errno, "write", path_);
      }
      // pwrite returning 0 for n > 0 is not supposed to happen; treat it as a
      // full device instead of spinning forever.
      if (w == 0) return ErrnoStatus(ENOSPC, "write", path_);
      p += w;
      n -= static_cast<size_t>(w);
      offset += static_cast<uint64_t>(w);
    }
    return Status::Ok();
  }

  Status ReadAt(void* buf, size_t n, uint64_t offset) override {
    if (fd_ < 0) return Closed("read");
    auto* p = static_cast<char*>(buf);
    const uint64_t start = offset;
    const size_t wanted = n;
    while (n > 0) {
      ssize_t r = ::pread(fd_, p, n, static_cast<off_t>(offset));
      if (r < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(errno, "read", path_);
      }
      if (r == 0) {
        return Status::Corrupt("short read " + path_ + ": wanted " + std::to_string(wanted) +
                               " bytes at offset " + std::to_string(start) + ", file ends after " +
                               std::to_string(offset - start));
      }
      p += r;
      n -= static_cast<size_t>(r);
      offset += static_cast<uint64_t>(r);
    }
    return Status::Ok();
  }

  Status StartWriteback(uint64_t offset, uint64_t n) override {
    if (fd_ < 0) return Closed("sync_file_range");
    if (::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(n),
                          SYNC_FILE_RANGE_WRITE) != 0)
      return ErrnoStatus(errno, "sync_file_range", path_);
    return Status::Ok();
  }

  Status Sync() override {
    if (fd_ < 0) return Closed("fdatasync");
    int rc;
    do {
      rc = ::fdatasync(fd_);
    } while (rc != 0 && errno == EINTR);
    return rc == 0 ? Status::Ok() : ErrnoStatus(errno, "fdatasync", path_);
  }

  Result<uint64_t> Size() override {
    if (fd_ < 0) return Closed("fstat");
    struct stat st;
    if (::fstat(fd_, &st) != 0) return ErrnoStatus(errno, "fstat", path_);
    return static_cast<uint64_t>(st.st_size);
  }

  Result<std::unique_ptr<FileView>> Map() override {
    if (fd_ < 0) return Closed("mmap");
    CAIRN_ASSIGN_OR_RETURN(const uint64_t size, Size());
    if (size == 0 || size > SIZE_MAX) return Status::Unsupported("mapping " + path_ + ": empty or too large");
    void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) return ErrnoStatus(errno, "mmap", path_);
    return std::unique_ptr<FileView>(new PosixView(static_cast<const uint8_t*>(p), size, path_));
  }

  Status Truncate(uint64_t size) override {
    if (fd_ < 0) return Closed("ftruncate");
    int rc;
    do {
      rc = ::ftruncate(fd_, static_cast<off_t>(size));
    } while (rc != 0 && errno == EINTR);
    return rc == 0 ? Status::Ok() : ErrnoStatus(errno, "ftruncate", path_);
  }

  Status Close() override {
    if (fd_ < 0) return Status::Ok();
    int fd = std::exchange(fd_, -1);
    // Never retry close(): on Linux the descriptor is released even when
    // close() fails (EINTR included), and a retry could close a descriptor
    // another thread just opened. EINTR is therefore not an error here.
    if (::close(fd) != 0 && errno != EINTR) return ErrnoStatus(errno, "close", path_);
    return Status::Ok();
  }

  const std::string& path() const override { return path_; }
  bool direct() const override { return direct_; }

 private:
  Status Closed(const char* op) const {
    return Status::State(std::string(op) + " " + path_ + ": file is closed");
  }

  int fd_;
  std::string path_;
  bool direct_;
};

// Directory stream closed on scope exit.
struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

class PosixFileSystem final : public FileSystem {
 public:
  Result<std::unique_ptr<File>> Open(const std::string& path, const OpenOptions& options) override {
    // Writers get O_RDWR rather than O_WRONLY so they can read back what they
    // wrote (verification, copies between tiers) through the same File.
    int flags = O_CLOEXEC;
    if (!options.write) {
      flags |= O_RDONLY;
    } else {
      flags |= options.in_place ? O_RDWR : (O_RDWR | O_CREAT | O_TRUNC);
    }
    if (options.direct) flags |= O_DIRECT;
    int fd;
    do {
      fd = ::open(path.c_str(), flags, static_cast<mode_t>(options.mode));
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
      // Linux reports a file system without O_DIRECT support (tmpfs before
      // 6.6, some FUSE and network file systems) as EINVAL from open().
      if (options.direct && errno == EINVAL) {
        return Status::Unsupported("open " + path + ": O_DIRECT not supported by this file system");
      }
      return ErrnoStatus(errno, "open", path);
    }
    return std::unique_ptr<File>(new PosixFile(fd, path, options.direct));
  }

  Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return ErrnoStatus(errno, "rename", from + " -> " + to);
    return Status::Ok();
  }

  Status Remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return ErrnoStatus(errno, "unlink", path);
    return Status::Ok();
  }

  Status CreateDirs(const std::string& path, uint32_t mode) override {
    if (path.empty()) return Status::InvalidArgument("mkdir: empty path");
    // Create each prefix ending before a '/', then the whole path. Existing
    // directories are fine (also when another process creates one between
    // our attempts); anything else in the way is an error.
    size_t pos = 0;
    while (true) {
      pos = path.find('/', pos + 1);
      std::string prefix = path.substr(0, pos);
      if (!prefix.empty() && prefix.back() != '/') CAIRN_RETURN_IF_ERROR(MakeOneDir(prefix, mode));
      if (pos == std::string::npos) break;
    }
    return Status::Ok();
  }

  Status RemoveDir(const std::string& path) override {
    if (::rmdir(path.c_str()) != 0) return ErrnoStatus(errno, "rmdir", path);
    return Status::Ok();
  }

  Status SyncDir(const std::string& path) override {
    int fd;
    do {
      fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) return ErrnoStatus(errno, "open directory", path);
    int rc;
    do {
      rc = ::fsync(fd);
    } while (rc != 0 && errno == EINTR);
    int err = errno;
    ::close(fd);
    // A few file systems (some FUSE and network ones) cannot fsync a
    // directory and say EINVAL; their renames are as durable as they get.
    if (rc != 0 && err != EINVAL) return ErrnoStatus(err, "fsync directory", path);
    return Status::Ok();
  }

  Result<std::vector<DirEntry>> List(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(errno, "opendir", path);
    std::unique_ptr<DIR, DirCloser> dir(::fdopendir(fd));
    if (!dir) {
      int err = errno;
      ::close(fd);
      return ErrnoStatus(err, "opendir", path);
    }
    std::vector<DirEntry> out;
    while (true) {
      errno = 0;
      struct dirent* e = ::readdir(dir.get());
      if (e == nullptr) {
        if (errno != 0) return ErrnoStatus(errno, "readdir", path);
        break;
      }
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      DirEntry entry;
      entry.name = e->d_name;
      if (e->d_type == DT_DIR) {
        entry.is_dir = true;
      } else if (e->d_type == DT_UNKNOWN || e->d_type == DT_LNK) {
        // Some file systems do not fill d_type; symlinks are followed.
        struct stat st;
        entry.is_dir = ::fstatat(::dirfd(dir.get()), e->d_name, &st, 0) == 0 && S_ISDIR(st.st_mode);
      }
      out.push_back(std::move(entry));
    }
    // readdir order is arbitrary; sorted output makes callers deterministic.
    std::sort(out.begin(), out.end(), [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
    return out;
  }

  Result<FileInfo> Stat(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(errno, "stat", path);
    FileInfo info;
    info.size = static_cast<uint64_t>(st.st_size);
    info.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    info.is_dir = S_ISDIR(st.st_mode);
    info.mode = static_cast<uint32_t>(st.st_mode & 07777);
    return info;
  }

 private:
  static Status MakeOneDir(const std::string& dir, uint32_t mode) {
    if (::mkdir(dir.c_str(), static_cast<mode_t>(mode)) == 0) return Status::Ok();
    int err = errno;
    if (err != EEXIST) return ErrnoStatus(err, "mkdir", dir);
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0) return ErrnoStatus(errno, "stat", dir);
    if (!S_ISDIR(st.st_mode)) return Status::Io("mkdir " + dir + ": not a directory");
    return Status::Ok();
  }
};

}  // namespace

FileSystem* FileSystem::Default() {
  // Leaked on purpose: background threads may still use it during static
  // destruction at exit.
  static FileSystem* const fs = new PosixFileSystem();
  return fs;
}

Result<std::unique_ptr<File>> OpenPreferringDirect(FileSystem* fs, const std::string& path,
                                                   OpenOptions options) {
  auto file = fs->Open(path, options);
  if (file.ok() || !options.direct || file.status().code() != Code::kUnsupported) return file;
  options.direct = false;
  return fs->Open(path, options);
}

std::string JoinPath(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  size_t a_end = a.find_last_not_of('/');
  size_t b_begin = b.find_first_not_of('/');
  std::string head = a_end == std::string::npos ? std::string() : a.substr(0, a_end + 1);
  std::string tail = b_begin == std::string::npos ? std::string() : b.substr(b_begin);
  return head + "/" + tail;
}

Status ErrnoStatus(int err, const std::string& op, const std::string& path) {
  std::string msg = op + " " + path + ": " + ErrnoText(err);
  switch (err) {
    case ENOSPC:
    case EDQUOT:
      return Status::NoSpace(std::move(msg));
    case ENOENT:
      return Status::NotFound(std::move(msg));
    case EEXIST:
      return Status::Exists(std::move(msg));
    case ENOMEM:
      return Status::NoMemory(std::move(msg));
    default:
      return Status::Io(std::move(msg));
  }
}

}  // namespace cairn::os
