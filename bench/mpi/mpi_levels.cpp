// cairn-bench-mpi --levels (mpi_levels.hpp; docs/bench.md, "MPI: the
// redundancy levels").
//
// Two clients over the same protected buffer, in their own directories: one
// with L1 alone, one with the levels asked (L2 every checkpoint, L3 every
// second collective wait). Each cycle is what an application does: a
// checkpoint, then `interval` of computing (writing its buffer, no Cairn
// call), then the collective wait for that version at `local`. The cycles
// of the two clients alternate (L1 first in even cycles, second in odd
// ones). The figures per cycle are the job's (the slowest rank's); the
// report gives their medians.
#include "mpi/mpi_levels.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "cairn/cairn_mpi.h"
#include "cairn/group.hpp"
#include "common/json.hpp"
#include "common/timing.hpp"
#include "mpi/mpi_phases.hpp"

namespace cairn::bench {
namespace {

constexpr double kNone = std::numeric_limits<double>::quiet_NaN();

// The wall clock, as GlobalCommitState's moments are.
int64_t RealtimeNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One cycle of one client, this rank's view: when things happened
// (realtime ns; -1: not within the cycle).
struct Cycle {
  double checkpoint_s = 0, wait_s = 0;
  int64_t start_ns = -1, local_ns = -1, record_ns = -1, learned_ns = -1, l2_ns = -1, l3_ns = -1;
};

// The job's figures of a cycle (the slowest rank's).
struct JobCycle {
  double blocking_s = 0, local_commit_s = kNone, l2_protected_s = kNone, l3_protected_s = kNone;
  double global_commit_latency_s = kNone;
  double global_commit_learned_s =
      kNone;  // to the last rank's learning it (before its manifest write)
};

double MaxOver(double v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return v;
}
int64_t MaxOver(int64_t v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  return v;
}
// When the last rank saw an event (ns), or -1 when a rank did not see it.
int64_t LastOver(int64_t ns) {
  constexpr int64_t kUnseen = std::numeric_limits<int64_t>::max();
  const int64_t last = MaxOver(ns < 0 ? kUnseen : ns);
  return last == kUnseen ? -1 : last;
}
bool AllOk(bool ok) {
  int v = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return v == 1;
}
// The job's time from the checkpoint call to an event every rank saw
// (NaN when a rank did not see it).
double JobSince(const Cycle& c, int64_t ns) {
  const double mine = ns < 0 ? std::numeric_limits<double>::infinity()
                             : 1e-9 * static_cast<double>(ns - c.start_ns);
  const double job = MaxOver(mine);
  return std::isinf(job) ? kNone : job;
}

// The application computing for `seconds`: it writes one byte per page of
// its buffer, round after round, and calls no Cairn function.
void Compute(std::vector<uint8_t>& app, double seconds) {
  const auto start = Clock::now();
  uint8_t round = 1;
  while (Since(start) < seconds) {
    for (size_t i = 0; i < app.size(); i += 4096) app[i] = static_cast<uint8_t>(app[i] + round);
    ++round;
  }
}

Result<GlobalCommitState> StateOf(Client& c) { return ProgressGlobalCommit(c, "bench"); }

// Checkpoint, compute, wait; the state read between (the global commit
// learned while computing) and after (L2, which the wait completes).
Result<Cycle> RunCycle(Client& c, int64_t version, double interval, std::vector<uint8_t>& app) {
  MPI_Barrier(MPI_COMM_WORLD);
  Cycle y;
  y.start_ns = RealtimeNs();
  auto t0 = Clock::now();
  CAIRN_RETURN_IF_ERROR(c.Checkpoint("bench", version));
  y.checkpoint_s = Since(t0);
  Compute(app, interval);
  CAIRN_ASSIGN_OR_RETURN(GlobalCommitState before, StateOf(c));
  if (before.local_version >= version) y.local_ns = before.local_commit_ns;
  if (before.global_version >= version) {
    y.record_ns = before.global_record_ns;
    y.learned_ns = before.global_learned_ns;
  }
  t0 = Clock::now();
  CAIRN_RETURN_IF_ERROR(c.Wait("bench", version, Level::kLocal));
  y.wait_s = Since(t0);
  CAIRN_ASSIGN_OR_RETURN(GlobalCommitState after, StateOf(c));
  if (y.local_ns < 0 && after.local_version == version) y.local_ns = after.local_commit_ns;
  if (after.l2_version == version) y.l2_ns = after.l2_protected_ns;
  return y;
}

JobCycle JobOf(const Cycle& y) {
  JobCycle j;
  j.blocking_s = MaxOver(y.checkpoint_s + y.wait_s);
  j.local_commit_s = JobSince(y, y.local_ns);
  j.l2_protected_s = JobSince(y, y.l2_ns);
  j.l3_protected_s = JobSince(y, y.l3_ns);
  const int64_t last_local = LastOver(y.local_ns);
  const int64_t last_record = LastOver(y.record_ns);
  const int64_t last_learned = LastOver(y.learned_ns);
  if (last_local >= 0 && last_record >= 0) {
    j.global_commit_latency_s = 1e-9 * static_cast<double>(last_record - last_local);
  }
  if (last_local >= 0 && last_learned >= 0) {
    j.global_commit_learned_s = 1e-9 * static_cast<double>(last_learned - last_local);
  }
  return j;
}

// The L3 of a cycle's version, read once the next cycle may start (or at
// the end, waiting for it): its parity's time, when it was that version's.
Status ReadL3(Client& c, int64_t version, Cycle* y, bool wait_for_it) {
  const auto deadline = Clock::now() + std::chrono::minutes(2);
  for (;;) {
    CAIRN_ASSIGN_OR_RETURN(GlobalCommitState st, StateOf(c));
    if (st.l3_version == version) y->l3_ns = st.l3_protected_ns;
    if (st.l3_version >= version || !wait_for_it) return Status::Ok();
    if (Clock::now() > deadline)
      return Status::Io("the parity of version " + std::to_string(version) + " never came");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Result<std::unique_ptr<Client>> OpenConfig(const std::string& scratch, bool l2, bool l3,
                                           L3Code code, int parity) {
  auto c = LoadConfig(nullptr);
  if (c.ok()) {
    c->scratch_dir = scratch;
    c->l2_every = l2 ? 1 : 0;
    c->l3_every = l3 ? 2 : 0;
    c->l3_code = code;
    c->l3_parity = parity;
    if (Status s = c->Validate(); !s.ok()) return s;
  }
  return OpenMpi(MPI_COMM_WORLD, std::move(c));
}

// A figure, or null when it did not happen within its cycle.
Json Num(double v) { return std::isnan(v) ? Json() : Json(v); }

// The median over the cycles where it happened (NaN: in none).
double MedianOf(const std::vector<JobCycle>& v, double JobCycle::*f) {
  std::vector<double> x;
  for (const JobCycle& j : v) {
    if (!std::isnan(j.*f)) x.push_back(j.*f);
  }
  return x.empty() ? kNone : Median(x);
}

Json Target(double value, double target) {
  Json t = Json::Object();
  t.Set("value", Num(value)).Set("target", target).Set("at_least", false);
  t.Set("met", !std::isnan(value) && value <= target);
  return t;
}

// Each client's cycles, run interleaved; `ok` false on any rank stops all.
struct Run {
  std::vector<JobCycle> l1, levels;
  std::vector<int64_t> l3_turns;  // versions of the levels' client that were L3 turns
};

Status Warm(Client& c, std::vector<uint8_t>& app, double* slowest_s, bool l3) {
  // Versions 0 and 1: waits 1 and 2, the second an L3 turn (every 2nd wait).
  for (int64_t v = 0; v <= 1; ++v) {
    CAIRN_ASSIGN_OR_RETURN(Cycle y, RunCycle(c, v, 0, app));
    if (l3 && v == 1) CAIRN_RETURN_IF_ERROR(ReadL3(c, v, &y, true));
    const int64_t last = std::max({y.local_ns, y.l2_ns, y.l3_ns});
    *slowest_s = std::max(*slowest_s, 1e-9 * static_cast<double>(last - y.start_ns) + y.wait_s);
  }
  return Status::Ok();
}

Status Measure(const LevelsOptions& o, Client& l1, Client& lv, std::vector<uint8_t>& app,
               double interval, Run* run) {
  Cycle previous;  // the levels' client's, for its L3
  for (uint64_t i = 0; i < o.checkpoints; ++i) {
    const int64_t v = static_cast<int64_t>(i) + 2;
    const bool l3_turn = o.l3 && v % 2 == 1;  // waits 2, 4, ...: versions 1, 3, ...
    for (int k = 0; k < 2; ++k) {
      const bool levels = (k + static_cast<int>(i)) % 2 == 1;
      Client& c = levels ? lv : l1;
      if (levels && o.l3 && v > 2 && (v - 1) % 2 == 1) {  // the previous version was an L3 turn
        CAIRN_RETURN_IF_ERROR(ReadL3(c, v - 1, &previous, false));
        run->levels.back().l3_protected_s = JobSince(previous, previous.l3_ns);
      }
      auto y = RunCycle(c, v, interval, app);
      if (!AllOk(y.ok())) return y.ok() ? Status::Io("a cycle failed on another rank") : y.status();
      (levels ? run->levels : run->l1).push_back(JobOf(*y));
      if (levels) {
        previous = *y;
        if (l3_turn) run->l3_turns.push_back(v);
      }
    }
  }
  if (o.l3 && !run->l3_turns.empty() &&
      run->l3_turns.back() == static_cast<int64_t>(o.checkpoints) + 1) {
    CAIRN_RETURN_IF_ERROR(ReadL3(lv, run->l3_turns.back(), &previous, true));
    run->levels.back().l3_protected_s = JobSince(previous, previous.l3_ns);
  }
  return Status::Ok();
}

Json CycleJson(const JobCycle& j, const char* config) {
  Json c = Json::Object();
  c.Set("config", config)
      .Set("blocking_s", j.blocking_s)
      .Set("local_commit_s", Num(j.local_commit_s));
  c.Set("l2_protected_s", Num(j.l2_protected_s)).Set("l3_protected_s", Num(j.l3_protected_s));
  c.Set("global_commit_latency_s", Num(j.global_commit_latency_s));
  c.Set("global_commit_learned_s", Num(j.global_commit_learned_s));
  return c;
}

Json Report(const LevelsOptions& o, const Run& run, int size, double interval, bool multiple,
            const std::string& command) {
  Json doc = Json::Object();
  doc.Set("command", command)
      .Set("ranks", size)
      .Set("size_bytes", o.size)
      .Set("checkpoints", o.checkpoints);
  doc.Set("levels", std::string("L1") + (o.l2 ? ",L2" : "") + (o.l3 ? ",L3" : ""))
      .Set("l3_code", L3CodeName(o.l3_code))
      .Set("l3_parity", EffectiveL3Parity(o.l3_code, o.l3_parity));
  doc.Set("interval_s", interval).Set("mpi_thread_multiple", multiple);
  Json cycles = Json::Array();
  for (size_t i = 0; i < run.levels.size(); ++i) {
    cycles.Push(CycleJson(run.l1[i], "L1"));
    cycles.Push(CycleJson(run.levels[i], "levels"));
  }
  doc.Set("cycles", std::move(cycles));
  const double blocking = MedianOf(run.levels, &JobCycle::blocking_s);
  const double blocking_l1 = MedianOf(run.l1, &JobCycle::blocking_s);
  const double local = MedianOf(run.levels, &JobCycle::local_commit_s);
  const double l2 = MedianOf(run.levels, &JobCycle::l2_protected_s);
  const double l3 = MedianOf(run.levels, &JobCycle::l3_protected_s);
  const double latency = MedianOf(run.levels, &JobCycle::global_commit_latency_s);
  doc.Set("blocking_s", Num(blocking)).Set("blocking_l1_s", Num(blocking_l1));
  doc.Set("local_commit_s", Num(local))
      .Set("l2_protected_s", Num(l2))
      .Set("l3_protected_s", Num(l3));
  doc.Set("global_commit_latency_s", Num(latency));
  doc.Set("global_commit_learned_s", Num(MedianOf(run.levels, &JobCycle::global_commit_learned_s)));
  Json targets = Json::Object();
  targets.Set("blocking_vs_l1", Target(blocking / blocking_l1, 1.15));
  if (o.l2) targets.Set("l2_vs_local", Target(l2 / local, 2.0));
  if (o.l3) targets.Set("l3_vs_local", Target(l3 / local, 3.0));
  targets.Set("global_commit_latency_s", Target(latency, 0.010));
  doc.Set("targets", std::move(targets));
  return doc;
}

}  // namespace

int RunLevels(const LevelsOptions& o, int rank, int size, const std::string& command) {
  const std::string root = RunDir(o.dir, "cairn-bench-levels");
  if (root.empty()) return 1;
  // As cairn-bench-mpi's capture phase (every byte copied, the cache
  // populated at open, no copy threads), and one simulated node per rank
  // unless the caller says otherwise: L2 and L3 need several nodes.
  setenv("CAIRN_CHANGES", "full", 0);
  setenv("CAIRN_HOST_CACHE", std::to_string(2 * o.size + (16 << 20)).c_str(), 0);
  setenv("CAIRN_HOST_CACHE_INIT", "eager", 0);
  setenv("CAIRN_COPY_THREADS", "0", 0);
  setenv("CAIRN_KEEP", "2", 0);
  setenv("CAIRN_MPI_RANKS_PER_NODE", "1", 0);
  int provided = 0;
  MPI_Query_thread(&provided);
  std::vector<uint8_t> app(o.size);
  for (size_t i = 0; i < app.size(); i += 4096) app[i] = static_cast<uint8_t>(i / 4096 + rank);
  Status status;
  Run run;
  double interval = o.interval_s;
  {
    auto l1 = OpenConfig(root + "/l1", false, false, L3Code::kXor, 0);
    auto lv =
        l1.ok() ? OpenConfig(root + "/levels", o.l2, o.l3, o.l3_code, o.l3_parity) : l1.status();
    status = !l1.ok() ? l1.status() : lv.status();
    if (status.ok()) status = (*l1)->Protect(1, app.data(), app.size());
    if (status.ok()) status = (*lv)->Protect(1, app.data(), app.size());
    double slowest = 0;
    if (AllOk(status.ok())) status = Warm(**l1, app, &slowest, false);
    if (AllOk(status.ok())) status = Warm(**lv, app, &slowest, o.l3);
    // Long enough for every level to finish between checkpoints.
    if (interval <= 0) interval = std::max(0.5, 1.5 * MaxOver(slowest));
    if (AllOk(status.ok())) status = Measure(o, **l1, **lv, app, interval, &run);
    for (auto* c : {&l1, &lv}) {
      if (!c->ok()) continue;
      Status closed = (**c)->Close();  // collective
      if (status.ok()) status = closed;
    }
  }
  const bool ok = AllOk(status.ok());
  if (!status.ok()) std::fprintf(stderr, "rank %d: %s\n", rank, status.ToString().c_str());
  if (rank == 0 && ok)
    Publish(Report(o, run, size, interval, provided == MPI_THREAD_MULTIPLE, command).Dump() + "\n",
            o.json_path);
  RemoveRunDir(root, o.dir.empty());
  return ok ? 0 : 1;
}

}  // namespace cairn::bench
