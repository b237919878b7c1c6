#include "common/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace cairn::bench {

Status MakeDirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return ErrnoStatus(ec.value(), "mkdir", path);
  return Status::Ok();
}

Status RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return ErrnoStatus(ec.value(), "remove", path);
  return Status::Ok();
}

Status EmptyDir(const std::string& path) {
  CAIRN_RETURN_IF_ERROR(MakeDirs(path));
  std::error_code ec;
  for (std::filesystem::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    CAIRN_RETURN_IF_ERROR(RemoveTree(it->path().string()));
  }
  if (ec) return ErrnoStatus(ec.value(), "list", path);
  return Status::Ok();
}

Result<std::string> MakeTempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") +
                     "/cairn-bench-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return ErrnoStatus(errno, "mkdtemp", tmpl);
  return tmpl;
}

bool DirectIoSupported(const std::string& dir) {
  const std::string path = dir + "/.direct-probe";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0600);
  if (fd < 0) {
    ::unlink(path.c_str());  // buffered open may have created nothing; harmless
    return false;
  }
  // Some file systems accept the flag at open and refuse the I/O: try one block.
  void* block = nullptr;
  bool ok = false;
  if (::posix_memalign(&block, 4096, 4096) == 0) {
    std::memset(block, 0, 4096);
    ok = ::pwrite(fd, block, 4096, 0) == 4096;
    std::free(block);
  }
  ::close(fd);
  ::unlink(path.c_str());
  return ok;
}

void FreeDeleter::operator()(uint8_t* p) const noexcept { std::free(p); }

Result<Buffer> AllocateBuffer(size_t bytes) {
  constexpr size_t kAlign = 2u << 20;
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = nullptr;
  if (::posix_memalign(&p, kAlign, rounded == 0 ? kAlign : rounded) != 0) {
    return Status::NoMemory("cannot allocate " + std::to_string(bytes) + " bytes");
  }
  return Buffer(static_cast<uint8_t*>(p));
}

void TouchPages(uint8_t* p, size_t bytes) {
  // A write per page: reading would map the shared zero page and fault again
  // on the first real write.
  for (size_t off = 0; off < bytes; off += 4096) p[off] = 0;
}

Status WriteAll(int fd, const void* data, size_t n, uint64_t offset, const std::string& path) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "write", path);
    }
    if (w == 0) return Status::Io("write " + path + ": wrote 0 bytes");
    p += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return Status::Ok();
}

Result<size_t> ReadAll(int fd, void* data, size_t n, uint64_t offset, const std::string& path) {
  auto* p = static_cast<uint8_t*>(data);
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, p + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "read", path);
    }
    if (r == 0) break;  // end of file
    done += static_cast<size_t>(r);
  }
  return done;
}

Result<ReadTiming> TimedColdRead(const std::string& path, uint8_t* chunk, size_t chunk_bytes,
                                 bool direct, uint64_t limit) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
  if (fd < 0) return ErrnoStatus(errno, "open", path);
  if (!direct) {
    (void)::fdatasync(fd);  // DONTNEED leaves dirty pages in place
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  }
  const auto t0 = std::chrono::steady_clock::now();
  ReadTiming t;
  Status st;
  while (t.bytes < limit) {
    Result<size_t> got = ReadAll(fd, chunk, chunk_bytes, t.bytes, path);
    if (!got.ok()) { st = got.status(); break; }
    t.bytes += *got;
    if (*got < chunk_bytes) break;  // end of file
  }
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::close(fd);
  if (!st.ok()) return st;
  return t;
}

}  // namespace cairn::bench
