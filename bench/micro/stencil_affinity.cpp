// cairn-stencil-affinity: the affinity-aware restart experiment
// (Saini et al., Middleware '14) on a 2-thread stencil (docs/bench.md,
// "Placement"). Two threads pinned to two CPUs, each owning (and first
// touching) half of the grid, run a 1-D 5-point stencil; the state is
// checkpointed with the threads registered (cairn_register_thread); then a
// restart in the same process: new, untouched memory, the version restored
// with restart.placement = restore or keep, new threads started under an
// adversarial binding (`same`: both on the first CPU, as a launcher binding
// the process to one core would; `swapped`: each on the other's CPU), each
// calling cairn_restore_affinity. Prints one JSON object: time per iteration
// before the checkpoint and after the restart.
//
//   cairn-stencil-affinity --dir DIR [--mib 32] [--iters 40]
//                          [--placement restore|keep] [--binding same|swapped]
#include <sched.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "cairn/cairn.hpp"
#include "os/mem/numa.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string dir;
  size_t mib = 32;
  int iters = 40;
  std::string placement = "restore";
  std::string binding = "same";
};

bool Parse(int argc, char** argv, Options* o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--dir") o->dir = v;
    else if (k == "--mib") o->mib = std::strtoul(v.c_str(), nullptr, 10);
    else if (k == "--iters") o->iters = std::atoi(v.c_str());
    else if (k == "--placement") o->placement = v;
    else if (k == "--binding") o->binding = v;
    else return false;
  }
  return argc % 2 == 1 && !o->dir.empty() && o->mib > 0 && o->iters > 0 &&
         (o->binding == "same" || o->binding == "swapped");
}

// One thread's share of a sweep: b[i] from a[i-2..i+2] over [lo, hi).
void Sweep(const double* a, double* b, size_t n, size_t lo, size_t hi) {
  for (size_t i = std::max<size_t>(lo, 2); i < std::min(hi, n - 2); ++i) {
    b[i] = 0.1 * a[i - 2] + 0.2 * a[i - 1] + 0.4 * a[i] + 0.2 * a[i + 1] + 0.1 * a[i + 2];
  }
}

// Runs `iters` sweeps on two threads, thread t pinned to cpus[t] (then
// restoring its recorded affinity when `restore_affinity`), and returns the
// seconds per iteration. `between` runs while both threads still exist.
template <typename Between>
double Run(cairn::Client& client, double* a, double* b, size_t n, int iters, const int cpus[2], bool first_touch,
           bool restore_affinity, Between between) {
  std::barrier sync(2);
  std::latch finished(2), done(1);
  Clock::time_point t0, t1;  // written by thread 0, read after `finished`
  auto body = [&](int t) {
    (void)cairn::os::RealNuma().SetAffinity(0, {cpus[t]});
    if (restore_affinity) (void)client.RestoreAffinity(t);
    (void)client.RegisterThread(t);
    const size_t lo = n / 2 * t, hi = t == 0 ? n / 2 : n;
    if (first_touch) {
      for (size_t i = lo; i < hi; ++i) a[i] = b[i] = static_cast<double>(i % 97);
    }
    sync.arrive_and_wait();
    if (t == 0) t0 = Clock::now();
    double *x = a, *y = b;
    for (int it = 0; it < iters; ++it) {
      Sweep(x, y, n, lo, hi);
      sync.arrive_and_wait();
      std::swap(x, y);
    }
    if (t == 0) t1 = Clock::now();
    finished.count_down();
    done.wait();  // alive until `between` (the checkpoint) has recorded it
  };
  {
    std::jthread first(body, 0), second(body, 1);
    finished.wait();
    between();
    done.count_down();
  }
  return std::chrono::duration<double>(t1 - t0).count() / iters;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!Parse(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: cairn-stencil-affinity --dir DIR [--mib N] [--iters N] [--placement restore|keep] "
                 "[--binding same|swapped]\n");
    return 2;
  }
  auto all = cairn::os::RealNuma().GetAffinity(0);
  if (!all.ok() || all->empty()) return 1;
  const int cpus[2] = {all->front(), all->back()};
  const size_t n = (o.mib << 20) / sizeof(double) / 2;  // two arrays
  cairn::Config c = cairn::DefaultConfig();
  c.scratch_dir = o.dir;
  c.host_cache_bytes = std::max<uint64_t>(64ull << 20, 2 * n * sizeof(double) + (16ull << 20));
  c.placement = o.placement;
  c.fsync = false;

  std::vector<double> a0(n), b0(n);
  double before = 0;
  {
    auto client = cairn::Client::Open(c);
    if (!client.ok()) {
      std::fprintf(stderr, "cairn: %s\n", client.status().ToString().c_str());
      return 1;
    }
    (void)(*client)->Protect(0, a0.data(), n * sizeof(double));
    (void)(*client)->Protect(1, b0.data(), n * sizeof(double));
    cairn::Status ckpt;
    before = Run(**client, a0.data(), b0.data(), n, o.iters, cpus, true, false, [&] {
      ckpt = (*client)->Checkpoint("stencil", 1);
      if (ckpt.ok()) ckpt = (*client)->Wait("stencil", 1, cairn::Level::kLocal);
    });
    if (!ckpt.ok()) {
      std::fprintf(stderr, "cairn: checkpoint: %s\n", ckpt.ToString().c_str());
      return 1;
    }
  }
  // The restart: fresh memory, a fresh client, the adversarial binding.
  std::vector<double> a1(n), b1(n);
  auto client = cairn::Client::Open(c);
  if (!client.ok()) return 1;
  (void)(*client)->Protect(0, a1.data(), n * sizeof(double));
  (void)(*client)->Protect(1, b1.data(), n * sizeof(double));
  const auto r0 = Clock::now();
  cairn::Status restored = (*client)->Restore("stencil", 1);
  const double restore_s = std::chrono::duration<double>(Clock::now() - r0).count();
  if (!restored.ok()) {
    std::fprintf(stderr, "cairn: restore: %s\n", restored.ToString().c_str());
    return 1;
  }
  const int bad[2] = {o.binding == "same" ? cpus[0] : cpus[1], cpus[0]};
  const double after = Run(**client, a1.data(), b1.data(), n, o.iters, bad, false, true, [] {});
  std::printf(
      "{\"placement\": \"%s\", \"binding\": \"%s\", \"cpus\": [%d, %d], \"nodes\": %d, \"mib\": %zu, "
      "\"iters\": %d, \"before_ms_per_iter\": %.3f, \"after_ms_per_iter\": %.3f, \"after_over_before\": %.3f, "
      "\"restore_ms\": %.1f}\n",
      o.placement.c_str(), o.binding.c_str(), cpus[0], cpus[1], cairn::os::RealNuma().topology().nodes(), o.mib,
      o.iters, before * 1e3, after * 1e3, after / before, restore_s * 1e3);
  return 0;
}
