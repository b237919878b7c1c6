// Machine limits, measured in the same run as the trials so that the ratios
// (Cairn vs. raw hardware) compare numbers taken under the same conditions.
//
//   memcpy        S bytes (capped at 256 MiB) between two touched buffers
//   write         buffered write of the probe file in 4 MiB pieces + fsync;
//                 write_nofsync is the same run timed before the fsync (the
//                 page-cache absorb rate, what an unsynced write sees)
//   direct write  the same with O_DIRECT (aligned buffer) + fsync, when the
//                 file system supports O_DIRECT
//   read          the probe file read in 4 MiB pieces, with O_DIRECT when
//                 supported (cold: from the disk), else buffered after
//                 POSIX_FADV_DONTNEED (cold-ish)
// Each is the median of kSamples runs. Probe files are deleted.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "bench.hpp"
#include "files.hpp"
#include "pattern.hpp"

namespace cairn::bench {
namespace {

constexpr int kSamples = 3;
constexpr size_t kChunk = 4u << 20;
constexpr uint64_t kMaxCopy = 256ull << 20;

struct WriteTiming {
  double write_s = 0;  // until the last write() returned
  double total_s = 0;  // until fsync + close returned
};

// Writes `bytes` (a multiple of kChunk) to `path` from `chunk`.
Result<WriteTiming> TimedWrite(const std::string& path, uint64_t bytes, const uint8_t* chunk,
                               bool direct) {
  const int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | (direct ? O_DIRECT : 0);
  const Clock::time_point t0 = Clock::now();
  int fd = ::open(path.c_str(), flags, 0600);
  if (fd < 0) return ErrnoStatus(errno, "open", path);
  Status st;
  for (uint64_t off = 0; off < bytes && st.ok(); off += kChunk) {
    st = WriteAll(fd, chunk, kChunk, off, path);
  }
  const Clock::time_point t1 = Clock::now();
  if (st.ok() && ::fsync(fd) != 0) st = ErrnoStatus(errno, "fsync", path);
  if (::close(fd) != 0 && st.ok()) st = ErrnoStatus(errno, "close", path);
  const Clock::time_point t2 = Clock::now();
  if (!st.ok()) return st;
  return WriteTiming{Seconds(t0, t1), Seconds(t0, t2)};
}

Result<double> TimedRead(const std::string& path, uint64_t bytes, uint8_t* chunk, bool direct) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
  if (fd < 0) return ErrnoStatus(errno, "open", path);
  if (!direct) ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);  // best effort
  const Clock::time_point t0 = Clock::now();
  Status st;
  for (uint64_t off = 0; off < bytes && st.ok(); off += kChunk) {
    Result<size_t> r = ReadAll(fd, chunk, kChunk, off, path);
    if (!r.ok()) st = r.status();
    else if (*r != kChunk) st = Status::Io("read " + path + ": unexpected end of file");
  }
  const Clock::time_point t1 = Clock::now();
  ::close(fd);
  if (!st.ok()) return st;
  return Seconds(t0, t1);
}

double Gbps(uint64_t bytes, double s) { return s > 0 ? static_cast<double>(bytes) / s / 1e9 : 0; }

}  // namespace

Result<Limits> MeasureLimits(const std::string& dir, uint64_t file_bytes, const uint8_t* app,
                             uint64_t copy_bytes, bool quiet) {
  Limits lim;
  lim.samples = kSamples;

  // memcpy between two touched buffers; the first copy is a warm-up.
  lim.memcpy_bytes = std::min<uint64_t>(copy_bytes, kMaxCopy);
  {
    CAIRN_ASSIGN_OR_RETURN(Buffer dst, AllocateBuffer(lim.memcpy_bytes));
    TouchPages(dst.get(), lim.memcpy_bytes);
    std::vector<double> t;
    for (int i = 0; i <= 2 * kSamples; ++i) {
      const Clock::time_point t0 = Clock::now();
      std::memcpy(dst.get(), app, lim.memcpy_bytes);
      asm volatile("" : : "r"(dst.get()) : "memory");  // keep the copy
      const Clock::time_point t1 = Clock::now();
      if (i > 0) t.push_back(Seconds(t0, t1));
    }
    lim.memcpy_gbps = Gbps(lim.memcpy_bytes, Median(t));
  }

  lim.file_bytes = (file_bytes + kChunk - 1) / kChunk * kChunk;
  CAIRN_ASSIGN_OR_RETURN(Buffer chunk, AllocateBuffer(kChunk));
  FillBase(chunk.get(), kChunk);
  const std::string buffered_path = dir + "/limits-buffered.probe";
  const std::string direct_path = dir + "/limits-direct.probe";
  const bool direct = DirectIoSupported(dir);

  Status st;
  std::vector<double> w, wn, dw, rd;
  for (int i = 0; i < kSamples && st.ok(); ++i) {
    Result<WriteTiming> r = TimedWrite(buffered_path, lim.file_bytes, chunk.get(), false);
    if (!r.ok()) { st = r.status(); break; }
    w.push_back(r->total_s);
    wn.push_back(r->write_s);
    if (direct || i + 1 < kSamples) ::unlink(buffered_path.c_str());  // else kept for reading
  }
  for (int i = 0; direct && i < kSamples && st.ok(); ++i) {
    Result<WriteTiming> r = TimedWrite(direct_path, lim.file_bytes, chunk.get(), true);
    if (!r.ok()) { st = r.status(); break; }
    dw.push_back(r->total_s);
    if (i + 1 < kSamples) ::unlink(direct_path.c_str());
  }
  const std::string& read_path = direct ? direct_path : buffered_path;
  for (int i = 0; i < kSamples && st.ok(); ++i) {
    Result<double> r = TimedRead(read_path, lim.file_bytes, chunk.get(), direct);
    if (!r.ok()) { st = r.status(); break; }
    rd.push_back(*r);
  }
  ::unlink(buffered_path.c_str());
  ::unlink(direct_path.c_str());
  CAIRN_RETURN_IF_ERROR(st.WithContext("measuring limits"));

  lim.write_gbps = Gbps(lim.file_bytes, Median(w));
  lim.write_nofsync_gbps = Gbps(lim.file_bytes, Median(wn));
  if (direct) lim.direct_write_gbps = Gbps(lim.file_bytes, Median(dw));
  lim.read_gbps = Gbps(lim.file_bytes, Median(rd));
  lim.read_method = direct ? "direct" : "buffered";
  if (!quiet) {
    char dwrite[32] = "unsupported";
    if (direct) std::snprintf(dwrite, sizeof dwrite, "%.2f GB/s", *lim.direct_write_gbps);
    std::fprintf(stderr,
                 "limits: memcpy %.2f GB/s, write+fsync %.2f GB/s (page cache %.2f), "
                 "O_DIRECT write %s, read (%s) %.2f GB/s [%llu MiB probe]\n",
                 lim.memcpy_gbps, lim.write_gbps, lim.write_nofsync_gbps, dwrite,
                 lim.read_method.c_str(), lim.read_gbps,
                 static_cast<unsigned long long>(lim.file_bytes >> 20));
  }
  return lim;
}

}  // namespace cairn::bench
