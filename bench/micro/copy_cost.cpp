// cairn-copy-cost: the capture's copy routine against glibc's memcpy, with
// several processes copying at once as the ranks of a node do
// (docs/design.md, "Capture"; the capture / memcpy figure of cairn-bench-mpi):
//
//   cairn-copy-cost [MiB per process, 256] [processes, 4] [repeats, 9]
//
// Each process copies its MiB from a buffer of its own into touched pages of
// the host cache's kind (MADV_HUGEPAGE), by three methods, in an order that
// rotates from repeat to repeat, all processes starting each copy together
// (a process-shared barrier):
//   memcpy          one memcpy of the whole buffer (what cairn-bench-mpi's
//                   baseline does; glibc streams above its own threshold)
//   memcpy_blocks   memcpy per 4 MiB block (the capture's block size;
//                   glibc's cached stores at that size)
//   capture_blocks  core::CopyEngine::StreamCopy per 4 MiB block (what a
//                   capture of 32 MiB or more does)
// and prints, as one JSON line, each method's median over the repeats of the
// slowest process's time, and each against memcpy.
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "capture/copy_engine.hpp"
#include "common/timing.hpp"

namespace {

using cairn::bench::Clock;
using cairn::bench::Median;
using cairn::bench::Since;

constexpr size_t kBlock = 4u << 20;
constexpr int kMethods = 3;
constexpr const char* kNames[kMethods] = {"memcpy", "memcpy_blocks", "capture_blocks"};
constexpr int kMaxProcs = 64, kMaxRepeats = 99;

struct Shared {
  pthread_barrier_t barrier;
  double seconds[kMethods][kMaxRepeats][kMaxProcs];
};

void CopyBy(int method, uint8_t* dst, const uint8_t* src, size_t n) {
  if (method == 0) {
    std::memcpy(dst, src, n);
    return;
  }
  for (size_t at = 0; at < n; at += kBlock) {
    const size_t len = std::min(kBlock, n - at);
    if (method == 1) {
      std::memcpy(dst + at, src + at, len);
    } else {
      cairn::core::CopyEngine::StreamCopy(dst + at, src + at, len);
    }
  }
}

// One process's part; returns its exit status.
int Copier(Shared* sh, int proc, size_t bytes, int repeats) {
  auto* src = static_cast<uint8_t*>(std::malloc(bytes));
  void* mapped = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  // Every process reaches every barrier, failed or not: none is left waiting.
  const bool ok = src != nullptr && mapped != MAP_FAILED;
  auto* dst = static_cast<uint8_t*>(mapped);
  if (ok) {
    (void)::madvise(dst, bytes, MADV_HUGEPAGE);
    std::memset(src, proc + 1, bytes);
    std::memset(dst, 0, bytes);
  }
  for (int r = 0; r < repeats; ++r) {
    for (int k = 0; k < kMethods; ++k) {
      const int method = (k + r) % kMethods;
      pthread_barrier_wait(&sh->barrier);
      const Clock::time_point t0 = Clock::now();
      if (ok) CopyBy(method, dst, src, bytes);
      sh->seconds[method][r][proc] = Since(t0);
      if (ok && dst[bytes / 2] != static_cast<uint8_t>(proc + 1)) return 3;
    }
  }
  return ok ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  const long mib = argc > 1 ? std::atol(argv[1]) : 256;
  const int procs = argc > 2 ? std::atoi(argv[2]) : 4;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 9;
  if (mib <= 0 || procs < 1 || procs > kMaxProcs || repeats < 1 || repeats > kMaxRepeats) {
    std::fprintf(stderr, "usage: %s [MiB per process] [processes, 1-%d] [repeats, 1-%d]\n", argv[0], kMaxProcs,
                 kMaxRepeats);
    return 2;
  }
  const size_t bytes = static_cast<size_t>(mib) << 20;
  void* mem = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return 1;
  auto* sh = static_cast<Shared*>(mem);
  pthread_barrierattr_t attr;
  pthread_barrierattr_init(&attr);
  pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&sh->barrier, &attr, static_cast<unsigned>(procs));
  std::vector<pid_t> children;
  for (int p = 0; p < procs; ++p) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("fork");  // the children started wait at the barrier: end them
      for (pid_t c : children) ::kill(c, SIGKILL);
      for (size_t i = 0; i < children.size(); ++i) ::wait(nullptr);
      return 1;
    }
    if (pid == 0) ::_exit(Copier(sh, p, bytes, repeats));
    children.push_back(pid);
  }
  int failed = 0;
  for (int p = 0; p < procs; ++p) {
    int status = 0;
    if (::wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
  }
  if (failed) {
    std::fprintf(stderr, "cairn-copy-cost: a copying process failed (memory, or a wrong byte copied)\n");
    return 1;
  }
  double median[kMethods];
  for (int m = 0; m < kMethods; ++m) {
    std::vector<double> slowest;
    for (int r = 0; r < repeats; ++r)
      slowest.push_back(*std::max_element(sh->seconds[m][r], sh->seconds[m][r] + procs));
    median[m] = Median(slowest);
  }
  std::printf("{\"bytes_per_process\": %zu, \"processes\": %d, \"repeats\": %d", bytes, procs, repeats);
  for (int m = 0; m < kMethods; ++m) std::printf(", \"%s_s\": %.6f", kNames[m], median[m]);
  for (int m = 1; m < kMethods; ++m) std::printf(", \"memcpy_vs_%s\": %.3f", kNames[m], median[0] / median[m]);
  std::printf("}\n");
  return 0;
}
