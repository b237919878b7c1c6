// cairn-rtm: a mini reverse-time-migration demo of Cairn's adjoint history.
// See examples/rtm/README.md and docs/rtm.md.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

#include <cairn/cairn.hpp>

#include "migrate.hpp"
#include "model.hpp"
#include "png.hpp"
#include "snapshots.hpp"
#include "wave.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

constexpr const char* kUsage = R"(usage: cairn-rtm [options]

Mini reverse-time migration: models one shot over a layered earth, then
migrates it, keeping the source-wavefield snapshots of the forward pass in a
Cairn history (async) and/or in one file per snapshot (sync baseline).

  --nx N               interior cells across (default 1100)
  --nz N               interior cells in depth (default 550)
  --dx M               cell size in metres (default 10)
  --steps N            time steps; 0 = enough for the deepest reflection (default 0)
  --snapshot-every K   push the source wavefield every K steps (default 5)
  --host-cache SIZE    Cairn host cache, e.g. 256MiB (default 256MiB)
  --dir DIR            scratch directory for snapshot files
                       (default $TMPDIR/cairn-rtm-<pid>, removed at exit)
  --out DIR            where velocity.png and image.png go (default rtm-out)
  --trace PATH         Cairn's timeline trace of the async run (default
                       OUT/timeline.json; "" = none); draw it with cairn-plot
  --mode MODE          async (Cairn), sync (baseline) or both (default both)
  --sync-fsync on|off  fsync each baseline snapshot file. Default: run the
                       baseline twice, without fsync ("sync": snapshots are
                       scratch data, as Cairn writes them) and with fsync
                       ("sync+fsync"), and print both; given: only that one
  --check              verify that the flat reflectors are imaged at their
                       true depths (+-3 cells); exit 3 if not
  --mig-vscale F       scale the migration velocity by F (default 1; a wrong
                       value misplaces the reflectors: shows --check failing)
  --quiet              print only the summary
  --help               this text
Exit status: 0 ok, 1 Cairn or I/O error, 2 bad option, 3 check failed.
)";

struct Options {
  int nx = 1100, nz = 550;
  double dx = 10.0;
  int steps = 0;
  int snapshot_every = 5;
  uint64_t host_cache = 256ull << 20;
  std::string dir, out = "rtm-out", mode = "both";
  std::optional<std::string> trace;  // unset: OUT/timeline.json
  bool check = false, quiet = false;
  double mig_vscale = 1.0;
  std::optional<bool> sync_fsync;  // unset: both baseline variants
};

[[noreturn]] void BadOption(const std::string& msg) {
  std::fprintf(stderr, "cairn-rtm: %s\n(cairn-rtm --help lists the options)\n", msg.c_str());
  std::exit(2);
}

template <typename T>
T ParseNumber(std::string_view name, std::string_view text, T lo, T hi) {
  T v{};
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p != end || !(v >= lo && v <= hi)) {
    BadOption(std::string(name) + ": bad value '" + std::string(text) + "' (expected " +
              std::to_string(lo) + ".." + std::to_string(hi) + ")");
  }
  return v;
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::optional<std::string> inline_value;
    if (const size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      inline_value = arg.substr(eq + 1);
      arg.resize(eq);
    }
    auto value = [&]() -> std::string {
      if (inline_value) return *inline_value;
      if (i + 1 >= argc) BadOption(arg + " needs a value");
      return argv[++i];
    };
    auto flag = [&] {
      if (inline_value) BadOption(arg + " takes no value");
    };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "--nx") {
      o.nx = ParseNumber<int>(arg, value(), 40, 20000);
    } else if (arg == "--nz") {
      o.nz = ParseNumber<int>(arg, value(), 40, 20000);
    } else if (arg == "--dx") {
      o.dx = ParseNumber<double>(arg, value(), 0.1, 1000.0);
    } else if (arg == "--steps") {
      o.steps = ParseNumber<int>(arg, value(), 0, 10000000);
    } else if (arg == "--snapshot-every") {
      o.snapshot_every = ParseNumber<int>(arg, value(), 1, 1000000);
    } else if (arg == "--host-cache") {
      const std::string v = value();
      auto size = cairn::ParseSize(v);
      if (!size.ok()) BadOption("--host-cache: " + size.status().ToString());
      o.host_cache = *size;
    } else if (arg == "--dir") {
      o.dir = value();
      if (o.dir.empty()) BadOption("--dir: empty");
    } else if (arg == "--out") {
      o.out = value();
      if (o.out.empty()) BadOption("--out: empty");
    } else if (arg == "--trace") {
      o.trace = value();
    } else if (arg == "--mode") {
      o.mode = value();
      if (o.mode != "async" && o.mode != "sync" && o.mode != "both") {
        BadOption("--mode: expected async, sync or both, got '" + o.mode + "'");
      }
    } else if (arg == "--sync-fsync") {
      const std::string v = value();
      if (v != "on" && v != "off") BadOption("--sync-fsync: expected on or off, got '" + v + "'");
      o.sync_fsync = v == "on";
    } else if (arg == "--mig-vscale") {
      o.mig_vscale = ParseNumber<double>(arg, value(), 0.1, 10.0);
    } else if (arg == "--check") {
      flag();
      o.check = true;
    } else if (arg == "--quiet" || arg == "-q") {
      flag();
      o.quiet = true;
    } else {
      BadOption("unknown option '" + arg + "'");
    }
  }
  return o;
}

struct Row {
  std::string mode;
  double wall_s = 0;
  rtm::MigrationTimes t;
  uint64_t written = 0, read = 0;        // bytes to/from files (flush / prefetch+miss reads)
  std::optional<cairn::Stats> stats;     // async only
  std::vector<float> image;
};

std::string Gib(uint64_t b) { return cairn::FormatSize(b); }

int Fail(const cairn::Status& s) {
  std::fprintf(stderr, "cairn-rtm: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = Parse(argc, argv);
#if defined(__SSE2__)
  // Flush denormals to zero (FTZ | DAZ): the decaying wavefield ahead of the
  // front and in the sponge would otherwise slow the kernel down several-fold.
  _mm_setcsr(_mm_getcsr() | 0x8040);
#endif
  auto say = [&](const char* fmt, auto... args) {
    if (!opt.quiet) {
      std::fprintf(stderr, fmt, args...);
      std::fflush(stderr);
    }
  };
  const auto t_start = Clock::now();

  // ---- model and acquisition ----
  rtm::Grid grid{opt.nx, opt.nz, 25, static_cast<float>(opt.dx)};
  const rtm::Model truth = rtm::LayeredModel(grid);
  const rtm::Model direct = rtm::ConstantModel(grid, truth.layer_velocity.front());
  const int radius = std::max(2, static_cast<int>(std::lround(40.0 / opt.dx)));
  const rtm::Model smooth = rtm::SmoothedModel(truth, radius, 2, static_cast<float>(opt.mig_vscale));

  rtm::Acquisition acq;
  acq.src_x = opt.nx / 2;
  acq.depth = 2;
  acq.dt = rtm::Propagator::StableDt(truth);
  acq.f0 = static_cast<float>(truth.vmin() / (12.0 * opt.dx));  // ~12 cells per dominant wavelength
  acq.t0 = 1.2f / acq.f0;
  if (opt.steps > 0) {
    acq.nt = opt.steps;
  } else {  // vertical two-way time to the bottom, plus the wavelet delay
    double t = 0;
    for (int z = acq.depth; z < opt.nz; ++z) t += opt.dx / truth.v[grid.At(acq.src_x, z)];
    acq.nt = static_cast<int>(std::ceil((2.0 * t + 2.0 * acq.t0) / acq.dt));
  }

  const uint64_t snap_bytes = grid.cells() * sizeof(float);
  const int64_t nsnap = (acq.nt + opt.snapshot_every - 1) / opt.snapshot_every;
  say("cairn-rtm: %dx%d cells (+%d absorbing), dx %.1f m, dt %.3f ms, %d steps, Ricker %.1f Hz\n",
      opt.nx, opt.nz, grid.pad, opt.dx, acq.dt * 1e3, acq.nt, acq.f0);

  // ---- scratch directory ----
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(opt.out, ec);  // fail before the long computation
  if (ec) return Fail(cairn::Status::Io("create " + opt.out + ": " + ec.message()));
  const bool own_dir = opt.dir.empty();
  const std::string dir =
      own_dir ? (fs::temp_directory_path(ec) / ("cairn-rtm-" + std::to_string(::getpid()))).string()
              : opt.dir;
  fs::create_directories(dir, ec);
  if (ec) return Fail(cairn::Status::Io("create " + dir + ": " + ec.message()));
  struct Cleanup {
    std::string dir;
    bool own;
    ~Cleanup() {
      std::error_code e;
      if (own) {
        fs::remove_all(dir, e);
      } else {
        fs::remove_all(fs::path(dir) / "cairn", e);
        fs::remove_all(fs::path(dir) / "sync", e);
      }
    }
  } cleanup{dir, own_dir};

  // ---- the shot: true model minus direct wave ----
  auto t = Clock::now();
  say("cairn-rtm: modelling the shot (true model, then direct wave)...\n");
  rtm::ShotRecord shot = rtm::ModelShot(truth, acq);
  rtm::Subtract(shot, rtm::ModelShot(direct, acq));
  const double modelling_s = Since(t);

  // ---- migrations ----
  std::vector<std::string> modes;  // "async", "sync" (no fsync), "sync+fsync"
  if (opt.mode == "async" || opt.mode == "both") modes.push_back("async");
  if (opt.mode == "sync" || opt.mode == "both") {
    if (!opt.sync_fsync.value_or(false)) modes.push_back("sync");
    if (opt.sync_fsync.value_or(true)) modes.push_back("sync+fsync");
  }
  std::vector<Row> rows;
  const std::string trace_path = opt.trace ? *opt.trace : (fs::path(opt.out) / "timeline.json").string();
  for (const std::string& mode : modes) {
    say("cairn-rtm: migrating (%s: %lld snapshots of %s)...\n", mode.c_str(),
        static_cast<long long>(nsnap), Gib(snap_bytes).c_str());
    Row row;
    row.mode = mode;
    t = Clock::now();
    if (mode == "async") {
      auto store = rtm::CairnStore::Open((fs::path(dir) / "cairn").string(), opt.host_cache, trace_path);
      if (!store.ok()) return Fail(store.status());
      if (cairn::Status s = rtm::Migrate(smooth, acq, shot, opt.snapshot_every, **store, row.image, row.t);
          !s.ok()) {
        return Fail(s);
      }
      row.stats = (*store)->GetStats();
      if (cairn::Status s = (*store)->Close(); !s.ok()) return Fail(s);
      row.written = row.stats->flush_local.bytes;
      row.read = row.stats->prefetch.bytes;
    } else {
      auto store = rtm::SyncStore::Open((fs::path(dir) / "sync").string(), mode == "sync+fsync");
      if (!store.ok()) return Fail(store.status());
      if (cairn::Status s = rtm::Migrate(smooth, acq, shot, opt.snapshot_every, **store, row.image, row.t);
          !s.ok()) {
        return Fail(s);
      }
      if (cairn::Status s = (*store)->Close(); !s.ok()) return Fail(s);
      row.written = (*store)->bytes_written();
      row.read = (*store)->bytes_read();
    }
    row.wall_s = Since(t);
    rows.push_back(std::move(row));
  }

  // ---- images ----
  const std::vector<float>& image = rows.front().image;
  {
    std::vector<float> v(static_cast<size_t>(opt.nx) * opt.nz);
    for (int z = 0; z < opt.nz; ++z)
      for (int x = 0; x < opt.nx; ++x) v[static_cast<size_t>(z) * opt.nx + x] = truth.v[grid.At(x, z)];
    std::string err = rtm::WritePng((fs::path(opt.out) / "velocity.png").string(), opt.nx, opt.nz, 1,
                                    rtm::VelocityToGray(v, truth.vmin(), truth.vmax()));
    // Mute the top (source/receiver artefacts) for display only.
    std::vector<float> shown = image;
    const int mute = std::min(opt.nz, acq.depth + 6);
    std::fill(shown.begin(), shown.begin() + static_cast<size_t>(mute) * opt.nx, 0.0f);
    if (err.empty())
      err = rtm::WritePng((fs::path(opt.out) / "image.png").string(), opt.nx, opt.nz, 3,
                          rtm::ImageToRgb(shown, 0.99));
    if (!err.empty()) return Fail(cairn::Status::Io(err));
  }

  // ---- summary ----
  std::printf("cairn-rtm summary\n");
  std::printf("  grid            %d x %d cells (+%d absorbing each side = %d x %d), dx %.1f m\n", opt.nx,
              opt.nz, grid.pad, grid.NX(), grid.NZ(), opt.dx);
  std::printf("  steps           %d x %.3f ms = %.2f s of wave time, Ricker %.1f Hz\n", acq.nt,
              acq.dt * 1e3, acq.nt * acq.dt, acq.f0);
  std::printf("  snapshots       %lld (every %d steps) x %s = %s; host cache %s\n",
              static_cast<long long>(nsnap), opt.snapshot_every, Gib(snap_bytes).c_str(),
              Gib(snap_bytes * static_cast<uint64_t>(nsnap)).c_str(), Gib(opt.host_cache).c_str());
  std::printf("  modelling       %.2f s (shot in the true model + direct wave)\n", modelling_s);
  std::printf("\n  %-10s %8s %8s %8s %9s %9s %9s %11s %11s %6s\n", "mode", "wall_s", "fwd_s", "bwd_s",
              "fwd_blk_s", "bwd_blk_s", "ms/snap", "written", "read", "hits");
  for (const Row& r : rows) {
    const double per = r.t.snapshots > 0
                           ? 1e3 * (r.t.forward_s + r.t.backward_s - r.t.forward_blocked_s -
                                    r.t.backward_blocked_s) / (2.0 * r.t.snapshots)
                           : 0.0;
    std::string hits = "-";
    if (r.stats) {
      const uint64_t n = r.stats->cache_hits + r.stats->cache_misses;
      char b[32];
      std::snprintf(b, sizeof b, "%.1f%%", n ? 100.0 * r.stats->cache_hits / n : 0.0);
      hits = b;
    }
    std::printf("  %-10s %8.2f %8.2f %8.2f %9.3f %9.3f %9.1f %11s %11s %6s\n", r.mode.c_str(), r.wall_s,
                r.t.forward_s, r.t.backward_s, r.t.forward_blocked_s, r.t.backward_blocked_s, per,
                Gib(r.written).c_str(), Gib(r.read).c_str(), hits.c_str());
  }
  std::printf("  (ms/snap: compute between snapshots; written/read: async = Cairn flush/prefetch "
              "traffic, sync = file bytes)\n");
  for (const Row& r : rows) {
    if (!r.stats) continue;
    const cairn::Stats& s = *r.stats;
    std::printf("  cairn: hits %llu, misses %llu, prefetch waits %llu, flushes skipped %llu, "
                "capture blocked %.3f s, evictions %llu\n",
                static_cast<unsigned long long>(s.cache_hits), static_cast<unsigned long long>(s.cache_misses),
                static_cast<unsigned long long>(s.prefetch_waits),
                static_cast<unsigned long long>(s.flushes_skipped), s.capture_blocked_s,
                static_cast<unsigned long long>(s.evictions));
  }
  // Blocked time of each baseline variant against Cairn's; images of all runs.
  auto blocked = [](const Row& r) { return r.t.forward_blocked_s + r.t.backward_blocked_s; };
  bool same_images = true;
  for (const Row& r : rows) same_images = same_images && r.image == rows.front().image;
  if (rows.front().mode == "async") {
    const double a = blocked(rows.front());
    for (size_t i = 1; i < rows.size(); ++i) {
      const double b = blocked(rows[i]);
      std::printf("  blocked time    %s / async = %.3f s / %.3f s = %.1fx%s\n", rows[i].mode.c_str(),
                  b, a, a > 0 ? b / a : 0.0,
                  rows[i].mode == "sync" ? " (the fair baseline: scratch data, no fsync)" : "");
    }
  }
  if (rows.size() >= 2) {
    std::printf("  images          %s\n",
                same_images ? "identical in all runs" : "DIFFER between runs");
  }
  std::printf("  output          %s/velocity.png, %s/image.png\n", opt.out.c_str(), opt.out.c_str());
  if (!trace_path.empty() && opt.mode != "sync") {
    std::printf("  timeline        %s (pictures: cairn-plot %s)\n", trace_path.c_str(), trace_path.c_str());
  }
  std::printf("  total wall      %.2f s\n", Since(t_start));

  int rc = 0;
  if (!same_images) rc = 3;
  if (opt.check) {
    // Flat reflectors, picked over the central quarter of the traces, within a
    // window that stays clear of the neighbouring interfaces.
    const int x0 = opt.nx / 2 - opt.nx / 8, x1 = opt.nx / 2 + opt.nx / 8;
    std::vector<double> depths;
    for (const rtm::Interface& f : truth.interfaces)
      if (f.flat()) depths.push_back(f.depth);
    int window = 10;
    for (size_t i = 0; i < truth.interfaces.size(); ++i) {
      for (size_t j = 0; j < truth.interfaces.size(); ++j) {
        if (i == j) continue;
        const double gap = std::fabs(truth.interfaces[i].DepthAt(x0) - truth.interfaces[j].DepthAt(x0));
        const double gap2 = std::fabs(truth.interfaces[i].DepthAt(opt.nx / 2.0) -
                                      truth.interfaces[j].DepthAt(opt.nx / 2.0));
        window = std::min(window, static_cast<int>(std::min(gap, gap2) / 2));
      }
    }
    window = std::max(window, 4);
    constexpr double kTolerance = 3.0;
    const auto picks = rtm::PickReflectors(opt.nx, opt.nz, image, depths, x0, x1, window);
    bool ok = true;
    for (const rtm::PickedDepth& p : picks) {
      const double err = std::fabs(p.found_depth + 0.5 - p.true_depth);
      const bool good = err <= kTolerance;
      ok = ok && good;
      std::printf("  check           flat reflector at %.1f cells (%.0f m): image peak at %d (%.0f m), "
                  "off by %.1f cells: %s\n",
                  p.true_depth, p.true_depth * opt.dx, p.found_depth, (p.found_depth + 0.5) * opt.dx, err,
                  good ? "ok" : "MISPLACED");
    }
    if (!ok) {
      std::fprintf(stderr, "cairn-rtm: check failed: a flat reflector is imaged more than %.0f cells "
                           "from its true depth\n", kTolerance);
      rc = 3;
    } else {
      std::printf("  check           passed (tolerance %.0f cells, window +-%d)\n", kTolerance, window);
    }
  }
  if (!same_images) std::fprintf(stderr, "cairn-rtm: the images of the runs differ\n");
  return rc;
}
