// Parallel memcpy for the application-blocking copies (capture into the cache,
// restore/pop out of it). One thread's memcpy is bound by its memory latency,
// not by the machine's bandwidth: on our 2-core VM one thread copies ~4.8 GB/s
// and two copy ~9.5 GB/s. Since the application is blocked for the copy
// anyway, lending it helper threads for that moment cuts its blocking time.
//
// The same helpers run other application-blocking passes over memory that
// split the same way (ForEach: e.g. hashing chunks for change detection).
//
// The helpers sleep (futex) between copies. Owned by the Pipeline; the
// destructor stops and joins them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

namespace cairn::core {

struct CopySegment {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
};

class CopyEngine {
 public:
  // Below this many bytes a copy is not split (the wake-up would cost more).
  static constexpr size_t kMinParallelBytes = 1 << 20;

  // The helper count for host_cache.copy_threads = `configured`: itself when
  // >= 0; otherwise one per further core, at most 3 (none on one core).
  static int DefaultHelpers(int configured);

  // helpers >= 0 threads in addition to the calling thread.
  explicit CopyEngine(int helpers);
  ~CopyEngine();
  CopyEngine(const CopyEngine&) = delete;
  CopyEngine& operator=(const CopyEngine&) = delete;

  // How the destination is written. kStreaming: non-temporal stores (x86;
  // plain memcpy elsewhere), for copies far larger than the caches into
  // memory nobody reads soon on this core. A cached store first reads each
  // destination line (read-for-ownership): 1.5x the memory traffic of a
  // streaming one. glibc streams only copies above its own threshold (3/4 of
  // the shared cache it detects: 192 MiB on our VM), so one big memcpy
  // streams and the same bytes copied block by block do not: measured here,
  // 256 MiB in 4 MiB pieces took 38-46 ms of CPU cached, 30-34 ms streamed,
  // 27 ms as one memcpy.
  enum class Stores { kCached, kStreaming };

  // Copies every segment (they must not overlap each other's destinations).
  // Thread-safe: while one caller uses the helpers, another copies alone.
  void Copy(std::span<const CopySegment> segments, Stores stores = Stores::kCached);

  // Below this many bytes a streaming copy is not worth it (the caller's
  // data would leave the caches anyway only for larger copies).
  static constexpr size_t kMinStreamingBytes = 64 << 10;
  // Copies n bytes with non-temporal stores where the build supports them
  // (SSE2), else memcpy; the stores are fenced before it returns.
  static void StreamCopy(void* dst, const void* src, size_t n);

  // Runs fn(begin, end) over disjoint parts covering [0, items), one part per
  // thread (the caller and the helpers) and returns when all are done; every
  // cut but the last is a multiple of `align`. Below `min_parallel` items,
  // or while another caller has the helpers, the caller runs fn(0, items)
  // alone. Same thread-safety as Copy.
  void ForEach(size_t items, size_t min_parallel, size_t align, const std::function<void(size_t, size_t)>& fn);

  int helpers() const { return static_cast<int>(threads_.size()); }

 private:
  void HelperLoop(std::stop_token stop, size_t part);
  static void CopyPart(std::span<const CopySegment> segments, size_t begin, size_t end, Stores stores);

  std::mutex busy_;  // held by the caller that owns the helpers right now
  // The current job, published by `generation_` (release) and read by the
  // helpers after they observe the new generation (acquire).
  const std::function<void(size_t, size_t)>* job_ = nullptr;
  std::vector<size_t> cuts_;  // part i runs (*job_)(cuts_[i], cuts_[i+1])
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> remaining_{0};
  std::vector<std::jthread> threads_;
};

}  // namespace cairn::core
