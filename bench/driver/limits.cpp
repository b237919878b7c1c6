// Machine limits, measured in the same run as the trials so that the ratios
// (Cairn vs. raw hardware) compare numbers taken under the same conditions.
//
//   memcpy        S bytes (capped at 256 MiB) from the application buffer into
//                 a touched buffer, as a capture copies: with core::CopyEngine and the same
//                 number of threads (the application thread + Cairn's copy
//                 helpers) into pages of the cache's kind (MADV_HUGEPAGE with
//                 --huge-pages on); also one thread into the same pages, and
//                 one thread into 4 KiB pages (the plain memcpy limit)
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
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "driver/bench.hpp"
#include "capture/copy_engine.hpp"
#include "common/files.hpp"
#include "common/pattern.hpp"

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
  CAIRN_ASSIGN_OR_RETURN(ReadTiming t, TimedColdRead(path, chunk, kChunk, direct, bytes));
  if (t.bytes < bytes) return Status::Io("read " + path + ": unexpected end of file");
  return t.seconds;
}

double Gbps(uint64_t bytes, double s) { return s > 0 ? static_cast<double>(bytes) / s / 1e9 : 0; }

// Anonymous memory with the page kind of Cairn's cache, touched.
struct Pages {
  uint8_t* p = nullptr;
  size_t n = 0;
  Pages() = default;
  Pages(const Pages&) = delete;
  Pages& operator=(const Pages&) = delete;
  ~Pages() {
    if (p != nullptr) ::munmap(p, n);
  }
};
Status MapPages(size_t bytes, bool huge, Pages& out) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return ErrnoStatus(errno, "mmap", "memcpy limit buffer");
  out.p = static_cast<uint8_t*>(p);
  out.n = bytes;
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
  (void)::madvise(p, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);  // best effort, as Cairn
#endif
  TouchPages(out.p, bytes);
  return Status::Ok();
}

// Median seconds of copying n bytes src -> dst with Cairn's own copy engine
// (core::CopyEngine: the calling thread plus threads - 1 helpers, which live
// across the samples as in a client), after a warm-up copy.
double TimedCopy(uint8_t* dst, const uint8_t* src, size_t n, int threads) {
  core::CopyEngine engine(std::max(threads, 1) - 1);
  const core::CopySegment segment{.dst = dst, .src = src, .bytes = n};
  std::vector<double> t;
  for (int k = 0; k <= 2 * kSamples; ++k) {
    const Clock::time_point t0 = Clock::now();
    engine.Copy({&segment, 1});
    asm volatile("" : : "r"(dst) : "memory");  // keep the copy
    if (k > 0) t.push_back(Seconds(t0, Clock::now()));
  }
  return Median(t);
}

}  // namespace

int CaptureThreads(const Config& config) {
  return 1 + core::CopyEngine::DefaultHelpers(config.copy_threads);
}

Result<Limits> MeasureLimits(const std::string& dir, uint64_t file_bytes, const uint8_t* app,
                             uint64_t copy_bytes, int threads, bool huge_pages, bool quiet) {
  Limits lim;
  lim.samples = kSamples;

  // memcpy as a capture copies, then single-threaded (same pages, 4 KiB pages).
  lim.memcpy_bytes = std::min<uint64_t>(copy_bytes, kMaxCopy);
  lim.memcpy_threads = std::max(threads, 1);
  lim.memcpy_huge_pages = huge_pages;
  {
    Pages dst;
    CAIRN_RETURN_IF_ERROR(MapPages(lim.memcpy_bytes, huge_pages, dst));
    lim.memcpy_gbps = Gbps(lim.memcpy_bytes, TimedCopy(dst.p, app, lim.memcpy_bytes, threads));
    lim.memcpy_single_thread_gbps = Gbps(lim.memcpy_bytes, TimedCopy(dst.p, app, lim.memcpy_bytes, 1));
  }
  {
    Pages dst;
    CAIRN_RETURN_IF_ERROR(MapPages(lim.memcpy_bytes, false, dst));
    lim.memcpy_single_thread_4k_gbps =
        Gbps(lim.memcpy_bytes, TimedCopy(dst.p, app, lim.memcpy_bytes, 1));
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
                 "limits: memcpy %.2f GB/s (%d threads, %s pages; 1 thread %.2f, 4 KiB %.2f), "
                 "write+fsync %.2f GB/s (page cache %.2f), "
                 "O_DIRECT write %s, read (%s) %.2f GB/s [%llu MiB probe]\n",
                 lim.memcpy_gbps, lim.memcpy_threads, huge_pages ? "huge" : "4 KiB",
                 lim.memcpy_single_thread_gbps, lim.memcpy_single_thread_4k_gbps, lim.write_gbps, lim.write_nofsync_gbps, dwrite,
                 lim.read_method.c_str(), lim.read_gbps,
                 static_cast<unsigned long long>(lim.file_bytes >> 20));
  }
  return lim;
}

}  // namespace cairn::bench
