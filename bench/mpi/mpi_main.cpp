// cairn-bench-mpi: the closing figures for an MPI job, in one run
// (docs/bench.md, "MPI: cairn-bench-mpi"):
//
//   mpirun -np 4 cairn-bench-mpi --size 256MiB --repeat 3 --json FILE
//
// Every repeat runs, in turn (the order rotates from repeat to repeat, so no
// phase always follows another), the N ranks' concurrent memcpy of their
// buffers, a Cairn checkpoint of them followed by the wait for its global
// commit record (learned in the background, docs/mpi.md), and the
// synchronous baseline (write + fsync + MPI_Barrier). The figures are the
// medians over the repeats of the job's figures (the slowest rank's time).
#include <mpi.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cairn/cairn_mpi.h"
#include "common/json.hpp"
#include "common/parse.hpp"
#include "driver/bench.hpp"
#include "mpi/mpi_levels.hpp"
#include "mpi/mpi_phases.hpp"

namespace cairn::bench {
namespace {

struct MpiOptions {
  uint64_t size = 64ull << 20;  // per rank
  uint64_t repeat = 3;
  std::string json_path;
  std::string dir;       // empty: a fresh temporary directory, removed at the end
  uint64_t poll_us = 100;  // the application's pause between Cairn calls while it waits
  bool fsync = true;       // the baseline's fsync
  bool levels = false;     // --levels: the redundancy levels' comparison (mpi_levels.hpp)
  LevelsOptions lv;
};

const char kUsage[] =
    "usage: mpirun -np N cairn-bench-mpi [--size BYTES] [--repeat N] [--json FILE]\n"
    "         [--dir DIR] [--poll-us N] [--no-fsync]\n"
    "  --size      bytes per rank (default 64MiB)\n"
    "  --repeat    interleaved repeats; the figures are medians (default 3)\n"
    "  --json      write the report there (docs/bench.md says what each key means)\n"
    "  --dir       the run's directory (default: a fresh one under $TMPDIR, removed after)\n"
    "  --poll-us   pause between the Cairn calls that wait for the global commit (default 100)\n"
    "  --no-fsync  the synchronous baseline does not fsync\n"
    "The redundancy levels (docs/bench.md, \"MPI: the redundancy levels\"):\n"
    "  --levels L1|L1,L2|L1,L2,L3  compare L1 alone with these levels (L2 every checkpoint,\n"
    "                L3 every second wait), interleaved, instead of the figures above\n"
    "  --l3-code xor|rs  the L3 code (mpi.l3_code; rs: Reed-Solomon, needs ISA-L)\n"
    "  --l3-parity E   lost members an RS set rebuilds (mpi.l3_parity; default 2)\n"
    "  --checkpoints N checkpoints per configuration (default 8)\n"
    "  --interval-s S  computing between checkpoints (default: 1.5x the slowest level's\n"
    "                time in the warm-up, at least 0.5)\n"
    "The XOR rebuild of a lost node is cairn-bench-xor-rebuild's (docs/mpi.md).\n";

Result<MpiOptions> Parse(int argc, char** argv) {
  MpiOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string name = argv[i];
    auto value = [&]() -> Result<std::string> {
      if (i + 1 >= argc) return Bad(name, "needs a value");
      return std::string(argv[++i]);
    };
    if (name == "--size") {
      CAIRN_ASSIGN_OR_RETURN(std::string v, value());
      CAIRN_ASSIGN_OR_RETURN(o.size, ParseBytes(name, v));
    } else if (name == "--repeat") {
      CAIRN_ASSIGN_OR_RETURN(std::string v, value());
      CAIRN_ASSIGN_OR_RETURN(o.repeat, ParseCount(name, v, 1));
    } else if (name == "--poll-us") {
      CAIRN_ASSIGN_OR_RETURN(std::string v, value());
      CAIRN_ASSIGN_OR_RETURN(o.poll_us, ParseCount(name, v, 0));
    } else if (name == "--json") {
      CAIRN_ASSIGN_OR_RETURN(o.json_path, value());
    } else if (name == "--dir") {
      CAIRN_ASSIGN_OR_RETURN(o.dir, value());
    } else if (name == "--no-fsync") {
      o.fsync = false;
    } else if (name == "--levels") {
      CAIRN_ASSIGN_OR_RETURN(std::string v, value());
      if (v != "L1" && v != "L1,L2" && v != "L1,L2,L3") return Bad(name, "L1, L1,L2 or L1,L2,L3");
      o.levels = true;
      o.lv.l2 = v != "L1";
      o.lv.l3 = v == "L1,L2,L3";
    } else if (name == "--l3-code") {
      CAIRN_ASSIGN_OR_RETURN(std::string v, value());
      auto code = ParseL3Code(v);
      if (!code.ok()) return Bad(name, "xor or rs");
      o.lv.l3_code = *code;
    } else if (name == "--l3-parity") {
      CAIRN_ASSIGN_OR_RETURN(std::string v, value());
      CAIRN_ASSIGN_OR_RETURN(const uint64_t e, ParseCount(name, v, 1));
      o.lv.l3_parity = static_cast<int>(e);
    } else if (name == "--checkpoints") {
      CAIRN_ASSIGN_OR_RETURN(std::string v, value());
      CAIRN_ASSIGN_OR_RETURN(o.lv.checkpoints, ParseCount(name, v, 1));
    } else if (name == "--interval-s") {
      CAIRN_ASSIGN_OR_RETURN(std::string v, value());
      char* end = nullptr;
      o.lv.interval_s = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || !(o.lv.interval_s >= 0))
        return Bad(name, "seconds >= 0");
    } else {
      return Bad(name, "unknown option (--help lists them)");
    }
  }
  o.lv.size = o.size;
  o.lv.json_path = o.json_path;
  o.lv.dir = o.dir;
  return o;
}

double LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double one = -1;
  in >> one;
  return one;
}

// Over the ranks: the job's figure is the slowest rank's.
double Max(double v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return v;
}
int64_t Reduce(int64_t v, MPI_Op op) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT64_T, op, MPI_COMM_WORLD);
  return v;
}
// True on every rank when every rank passed ok.
bool AllOk(bool ok) { return Reduce(ok ? 1 : 0, MPI_MIN) == 1; }

// One repeat's job figures.
struct Repeat {
  double memcpy_s = 0, capture_s = 0, sync_s = 0;
  // Where the capture's time went (docs/bench.md): the fastest rank's time
  // inside checkpoint (and in memcpy), and over the ranks the most time
  // copying (stats capture.seconds) and waiting for cache room
  // (capture_blocked_s).
  double memcpy_min_s = 0, capture_min_s = 0, capture_copy_s = 0, capture_room_s = 0;
  double commit_last_s = 0, commit_first_s = 0;  // last local commit -> last / first record
  double commit_learned_s = 0;                    // last local commit -> last rank learns it
};

Json Target(double value, double target, bool at_least) {
  Json t = Json::Object();
  t.Set("value", value).Set("target", target).Set("at_least", at_least);
  t.Set("met", at_least ? value >= target : value <= target);
  return t;
}

// The settings that make the comparison fair (the caller's own win): every
// byte copied every time, the cache populated at open (fresh RAM costs
// ~1.5 s/GiB on first use here), no helper threads (every core runs a rank).
void SetFairDefaults(const MpiOptions& o, const std::string& root) {
  setenv("CAIRN_SCRATCH", (root + "/scratch").c_str(), 1);
  setenv("CAIRN_CHANGES", "full", 0);
  setenv("CAIRN_HOST_CACHE", std::to_string(2 * o.size + (16 << 20)).c_str(), 0);
  setenv("CAIRN_HOST_CACHE_INIT", "eager", 0);
  setenv("CAIRN_COPY_THREADS", "0", 0);
  setenv("CAIRN_KEEP", "2", 0);
}

// One repeat: the memcpy, the capture and the baseline, in an order that
// rotates with r; every rank's times reduced.
Status RunRepeat(Client& client, const MpiOptions& o, uint64_t r, uint8_t* dst,
                 const std::vector<uint8_t>& app, const std::string& sync_path, Repeat* rep) {
  for (int k = 0; k < 3; ++k) {
    switch ((k + r) % 3) {
      case 0: {
        const double mine = MemcpyPhase(dst, app.data(), app.size());
        rep->memcpy_s = Max(mine);
        rep->memcpy_min_s = -Max(-mine);
        break;
      }
      case 1: {
        const Stats before = client.GetStats();
        auto f = CapturePhase(client, static_cast<int64_t>(r + 1), o.poll_us);
        const Stats after = client.GetStats();
        if (!AllOk(f.ok()))
          return f.ok() ? Status::Io("a checkpoint failed on another rank") : f.status();
        rep->capture_s = Max(f->blocking_s);
        rep->capture_min_s = -Max(-f->blocking_s);
        rep->capture_copy_s = Max(after.capture.seconds - before.capture.seconds);
        rep->capture_room_s = Max(after.capture_blocked_s - before.capture_blocked_s);
        const int64_t last_commit = Reduce(f->local_commit_ns, MPI_MAX);
        rep->commit_last_s =
            1e-9 * static_cast<double>(Reduce(f->record_ns, MPI_MAX) - last_commit);
        rep->commit_first_s =
            1e-9 * static_cast<double>(Reduce(f->record_ns, MPI_MIN) - last_commit);
        rep->commit_learned_s =
            1e-9 * static_cast<double>(Reduce(f->learned_ns, MPI_MAX) - last_commit);
        break;
      }
      default: {
        auto s = SyncPhase(sync_path, app.data(), app.size(), o.fsync);
        if (!AllOk(s.ok()))
          return s.ok() ? Status::Io("the baseline failed on another rank") : s.status();
        rep->sync_s = Max(*s);
      }
    }
  }
  return Status::Ok();
}

// Rank 0's report: every repeat, the medians and the targets.
Json Document(const MpiOptions& o, int size, const std::string& command, double load_start,
              const std::vector<Repeat>& repeats) {
  auto median = [&](double Repeat::*field) {
    std::vector<double> v;
    for (const Repeat& r : repeats) v.push_back(r.*field);
    return Median(v);
  };
  const double bytes = static_cast<double>(o.size) * size;
  const double memcpy_bw = bytes / median(&Repeat::memcpy_s);
  const double capture_bw = bytes / median(&Repeat::capture_s);
  const double latency = median(&Repeat::commit_last_s);
  const double reduction = median(&Repeat::sync_s) / median(&Repeat::capture_s);
  Json doc = Json::Object();
  doc.Set("command", command).Set("ranks", size).Set("size_bytes", o.size);
  doc.Set("repeat", o.repeat).Set("poll_us", o.poll_us).Set("fsync", o.fsync);
  doc.Set("loadavg_start", load_start).Set("loadavg_end", LoadAverage());
  Json reps = Json::Array();
  for (const Repeat& r : repeats) {
    Json j = Json::Object();
    j.Set("memcpy_s", r.memcpy_s).Set("capture_s", r.capture_s).Set("sync_s", r.sync_s);
    j.Set("memcpy_min_s", r.memcpy_min_s)
        .Set("capture_min_s", r.capture_min_s)
        .Set("capture_copy_s", r.capture_copy_s);
    j.Set("capture_room_s", r.capture_room_s);
    j.Set("commit_last_s", r.commit_last_s).Set("commit_first_s", r.commit_first_s);
    j.Set("commit_learned_s", r.commit_learned_s);
    reps.Push(std::move(j));
  }
  doc.Set("repeats", std::move(reps));
  Json med = Json::Object();
  med.Set("memcpy_aggregate_bytes_per_s", memcpy_bw);
  med.Set("capture_aggregate_bytes_per_s", capture_bw);
  med.Set("capture_blocking_s", median(&Repeat::capture_s));
  med.Set("sync_blocking_s", median(&Repeat::sync_s));
  med.Set("commit_last_s", latency);
  med.Set("commit_first_s", median(&Repeat::commit_first_s));
  med.Set("commit_learned_s", median(&Repeat::commit_learned_s));
  doc.Set("medians", std::move(med));
  Json targets = Json::Object();
  targets.Set("capture_vs_memcpy", Target(capture_bw / memcpy_bw, 0.8, true));
  targets.Set("commit_latency_s", Target(latency, 0.010, false));
  targets.Set("blocking_reduction", Target(reduction, 5.0, true));
  doc.Set("targets", std::move(targets));
  return doc;
}

int Run(const MpiOptions& o, int rank, int size, std::string command) {
  // The run's directory, the same on every rank.
  const bool own_dir = o.dir.empty();
  const std::string root = RunDir(o.dir, "cairn-bench-mpi");
  if (root.empty()) return 1;
  SetFairDefaults(o, root);
  const double load_start = LoadAverage();

  // Both buffers touched before any timing. The memcpy's destination has the
  // page kind of Cairn's host cache (transparent huge pages, its default
  // host_cache.huge_pages), as cairn-bench's memcpy limit does: the capture
  // copies into that cache, and the baseline should not pay for 4 KiB pages
  // that the capture does not.
  std::vector<uint8_t> app(o.size);
  for (size_t i = 0; i < app.size(); i += 4096) app[i] = static_cast<uint8_t>(i / 4096 + rank);
  void* mapped = ::mmap(nullptr, o.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) {
    std::fprintf(stderr, "rank %d: mmap of the memcpy buffer: %s\n", rank, std::strerror(errno));
    return 1;
  }
  std::unique_ptr<void, std::function<void(void*)>> dst_map(mapped, [&](void* p) { ::munmap(p, o.size); });
  (void)::madvise(mapped, o.size, MADV_HUGEPAGE);
  std::span<uint8_t> dst(static_cast<uint8_t*>(mapped), o.size);
  std::memset(dst.data(), 0, dst.size());
  auto opened = OpenMpi(MPI_COMM_WORLD, nullptr);
  if (!opened.ok()) {
    std::fprintf(stderr, "rank %d: cairn_open_mpi: %s\n", rank, opened.status().ToString().c_str());
    return 1;
  }
  Client& client = **opened;
  Status status = client.Protect(1, app.data(), app.size());
  const std::string sync_path = root + "/sync.rank" + std::to_string(rank);

  // Warm-up, untimed: each phase once, so every repeat starts from the same
  // memory and file state (cache chunks used, files existing).
  (void)MemcpyPhase(dst.data(), app.data(), app.size());
  if (status.ok()) status = CapturePhase(client, 0, o.poll_us).status();
  if (status.ok()) status = SyncPhase(sync_path, app.data(), app.size(), o.fsync).status();

  std::vector<Repeat> repeats;
  for (uint64_t r = 0; r < o.repeat && AllOk(status.ok()); ++r) {
    Repeat rep;
    status = RunRepeat(client, o, r, dst.data(), app, sync_path, &rep);
    if (status.ok()) repeats.push_back(rep);
  }
  Status closed = client.Close();  // collective
  if (status.ok()) status = closed;
  const bool ok = AllOk(status.ok());
  if (!status.ok()) std::fprintf(stderr, "rank %d: %s\n", rank, status.ToString().c_str());
  if (rank == 0 && ok) {
    Publish(Document(o, size, command, load_start, repeats).Dump() + "\n", o.json_path);
  }
  RemoveRunDir(root, own_dir);
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace cairn::bench

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::fputs(cairn::bench::kUsage, stdout);
      return 0;
    }
  }
  // What an application that wants Cairn's own progress thread asks for
  // (docs/mpi.md, "Progress").
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  auto options = cairn::bench::Parse(argc, argv);
  if (!options.ok()) {
    if (rank == 0) std::fprintf(stderr, "cairn-bench-mpi: %s\n%s", options.status().message().c_str(), cairn::bench::kUsage);
    MPI_Finalize();
    return 2;
  }
  std::string command = "mpirun -np " + std::to_string(size);
  for (int i = 0; i < argc; ++i) command += std::string(" ") + argv[i];
  const int rc = options->levels ? cairn::bench::RunLevels(options->lv, rank, size, command)
                                 : cairn::bench::Run(*options, rank, size, command);
  MPI_Finalize();
  return rc;
}
