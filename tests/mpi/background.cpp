// The global commit learned in the background (docs/mpi.md), under mpirun
// with 2 and 4 ranks (ctest mpi_background_np2/4). Every rank checks what it
// sees; the failures are summed over the ranks and every rank exits 1 when
// any saw one.
//
//   1. versions 1-3 checkpointed, no collective call: Cairn calls alone
//      (cairn::ProgressGlobalCommit, as checkpoint and stats do) make every
//      rank's manifest record `committed 3`;
//   2. all ranks but the last commit version 4: rounds keep completing but
//      the manifest stays at 3 everywhere;
//   3. the last rank commits 4: every manifest reaches 4;
//   4. version 5 checkpointed and never polled, rank 0 runs rounds ahead of
//      the others: close completes the outstanding rounds on every rank (no
//      hang: mpirun's --timeout would kill it) and records 5;
//   5. retention keeps the newest global commit (CAIRN_KEEP=1): version 1 of
//      'ahead' is committed with a collective wait, then rank 0 alone
//      commits versions 2-4; it keeps exactly versions 1 and 4 (keep 1 alone
//      would leave it only 4, and no version common to every rank), and a
//      reopened job's collective restore_latest finds 1, byte-exact.
//
// With --thread-multiple (ctest mpi_background_mt_np2/4) MPI is initialised
// with MPI_THREAD_MULTIPLE, so Cairn progresses on its own thread (docs/mpi.md,
// "Progress"), and step 1 is first watched with no Cairn call at all: the
// manifests alone must come to say `committed 3`.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cairn/cairn_mpi.h"
#include "cairn/group.hpp"
#include "manifest_read.h"

namespace {

int g_rank = 0, g_size = 1, g_failures = 0;
bool g_thread_multiple = false;
std::string g_root;

#define CHECK(cond, what)                                                                  \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "rank %d: %s:%d: %s\n", g_rank, __FILE__, __LINE__, what);      \
      ++g_failures;                                                                        \
    }                                                                                      \
  } while (0)

void Setup() {
  char root[4096] = {0};
  if (g_rank == 0) {
    const char* tmp = std::getenv("TMPDIR");
    std::snprintf(root, sizeof root, "%s/cairn-mpi-bg.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(root) == nullptr) root[0] = '\0';
  }
  MPI_Bcast(root, sizeof root, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (root[0] == '\0') MPI_Abort(MPI_COMM_WORLD, 2);
  g_root = root;
  setenv("CAIRN_SCRATCH", (g_root + "/scratch").c_str(), 1);
  setenv("CAIRN_HOST_CACHE", "1MiB", 1);
  setenv("CAIRN_BLOCK_SIZE", "64KiB", 1);
  setenv("CAIRN_COPY_THREADS", "0", 1);
  setenv("CAIRN_HOST_CACHE_INIT", "lazy", 1);
  setenv("CAIRN_MPI_RANKS_PER_NODE", "2", 1);
}

// This rank's manifest's `committed` line; -2 when unreadable.
int64_t ManifestCommitted() {
  const std::string path = g_root + "/scratch/node" + std::to_string(g_rank / 2) + "/rank" +
                           std::to_string(g_rank) + "/state/global";
  test_manifest_t m;
  return test_manifest_read(path.c_str(), &m) == 0 ? m.committed : -2;
}

// Watches this rank's manifest, making no Cairn call, until it records
// `committed v` or 30 s pass (then a failure).
void WatchManifest(int64_t v, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (ManifestCommitted() < v) {
    if (std::chrono::steady_clock::now() > deadline) {
      CHECK(false, what);
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// Makes Cairn calls until `done` holds or 30 s pass (then a failure). The
// pause between calls is the application's work between two Cairn calls; it
// leaves the cores to the flush threads on this oversubscribed machine.
cairn::GlobalCommitState PollUntil(cairn::Client& c,
                                   const std::function<bool(const cairn::GlobalCommitState&)>& done,
                                   const char* what, const char* name = "state") {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  cairn::GlobalCommitState st;
  for (;;) {
    auto s = cairn::ProgressGlobalCommit(c, name);
    if (!s.ok()) {
      CHECK(false, ("ProgressGlobalCommit: " + s.status().ToString()).c_str());
      return st;
    }
    st = *s;
    if (done(st)) return st;
    if (std::chrono::steady_clock::now() > deadline) {
      CHECK(false, what);
      return st;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void Run() {
  std::vector<unsigned char> buf(200 * 1024);
  auto opened = cairn::OpenMpi(MPI_COMM_WORLD, nullptr);
  if (!opened.ok()) {
    std::fprintf(stderr, "rank %d: OpenMpi: %s\n", g_rank, opened.status().ToString().c_str());
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  cairn::Client& c = **opened;
  CHECK(c.Protect(1, buf.data(), buf.size()).ok(), "protect");
  auto checkpoint = [&](int64_t v) {
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<unsigned char>(i + v + g_rank);
    CHECK(c.Checkpoint("state", v).ok(), "checkpoint");
  };
  const bool last = g_rank == g_size - 1;

  // 1.
  for (int64_t v = 1; v <= 3; ++v) checkpoint(v);
  if (g_thread_multiple)
    WatchManifest(3, "step 1: no Cairn call, and the manifest never said committed 3");
  auto st = PollUntil(c, [](const auto& s) { return s.global_version >= 3; },
                      "step 1: the global commit of version 3 was never recorded");
  CHECK(st.global_version == 3, "step 1: global version is not 3");
  CHECK(st.local_version == 3 && st.local_commit_ns > 0, "step 1: local commit of 3 unknown");
  CHECK(st.global_record_ns >= st.global_learned_ns && st.global_learned_ns >= st.local_commit_ns,
        "step 1: recorded before it was learned, or learned before the local commit");
  CHECK(ManifestCommitted() == 3, "step 1: the manifest does not say committed 3");

  // 2.
  if (!last) {
    checkpoint(4);
    PollUntil(c, [](const auto& s) { return s.local_version == 4; },
              "step 2: version 4 never committed locally");
  }
  MPI_Barrier(MPI_COMM_WORLD);  // every rank but the last has 4 now
  const uint64_t r0 = cairn::ProgressGlobalCommit(c, "state")->rounds;
  st = PollUntil(c, [&](const auto& s) { return s.rounds >= r0 + 3; },
                 "step 2: the background rounds stopped");
  CHECK(st.global_version == 3, "step 2: the global commit advanced past a rank's commits");
  CHECK(ManifestCommitted() == 3, "step 2: the manifest moved past 3");
  MPI_Barrier(MPI_COMM_WORLD);

  // 3.
  if (last) checkpoint(4);
  st = PollUntil(c, [](const auto& s) { return s.global_version >= 4; },
                 "step 3: the global commit of version 4 was never recorded");
  CHECK(ManifestCommitted() == 4, "step 3: the manifest does not say committed 4");

  // 4.
  checkpoint(5);
  if (g_rank == 0) {
    for (int i = 0; i < 100; ++i) (void)cairn::ProgressGlobalCommit(c, "state");
  }
  cairn::Status closed = c.Close();
  CHECK(closed.ok(), ("close: " + closed.ToString()).c_str());
  CHECK(ManifestCommitted() == 5, "step 4: close did not record committed 5");
}

cairn::Client& OpenOrAbort(std::unique_ptr<cairn::Client>* keep) {
  auto opened = cairn::OpenMpi(MPI_COMM_WORLD, nullptr);
  if (!opened.ok()) {
    std::fprintf(stderr, "rank %d: OpenMpi: %s\n", g_rank, opened.status().ToString().c_str());
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  *keep = std::move(opened).value();
  return **keep;
}

void RetentionKeepsTheNewestGlobalCommit() {
  setenv("CAIRN_KEEP", "1", 1);
  std::vector<unsigned char> buf(200 * 1024);
  auto fill = [&](int64_t v) {
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<unsigned char>(7 * i + v + g_rank);
  };
  std::unique_ptr<cairn::Client> owned;
  cairn::Client& c = OpenOrAbort(&owned);
  CHECK(c.Protect(1, buf.data(), buf.size()).ok(), "protect");
  fill(1);
  CHECK(c.Checkpoint("ahead", 1).ok(), "checkpoint 1");
  CHECK(c.Wait("ahead", 1, cairn::Level::kLocal).ok(), "step 5: collective wait for 1");
  if (g_rank == 0) {
    for (int64_t v = 2; v <= 4; ++v) {
      fill(v);
      CHECK(c.Checkpoint("ahead", v).ok(), "checkpoint");
    }
    PollUntil(c, [](const auto& s) { return s.local_version == 4; },
              "step 5: version 4 never committed locally", "ahead");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  cairn::Status closed = c.Close();  // the mover's retention passes are done
  CHECK(closed.ok(), ("close: " + closed.ToString()).c_str());
  if (g_rank == 0) {
    const std::string dir = g_root + "/scratch/node0/rank0/ahead/v";
    auto has = [&](int64_t v) {
      char file[32];
      std::snprintf(file, sizeof file, "%020lld.cairn", static_cast<long long>(v));
      return std::ifstream(dir + file).good();
    };
    CHECK(has(1), "step 5: rank 0's retention deleted version 1, the newest global commit");
    CHECK(!has(2) && !has(3), "step 5: retention kept versions 2 or 3 (keep 1)");
    CHECK(has(4), "step 5: rank 0 lost its newest version 4");
  }
  owned.reset();
  std::fill(buf.begin(), buf.end(), 0);
  cairn::Client& again = OpenOrAbort(&owned);
  CHECK(again.Protect(1, buf.data(), buf.size()).ok(), "protect");
  auto got = again.RestoreLatest("ahead");
  CHECK(got.ok() && *got == 1, ("step 5: collective restore_latest: " +
                                (got.ok() ? std::to_string(*got) : got.status().ToString()) +
                                ", want version 1").c_str());
  std::vector<unsigned char> want = buf;
  fill(1);
  CHECK(want == buf, "step 5: restored data is not version 1");
  CHECK(again.Close().ok(), "close");
}

}  // namespace

int main(int argc, char** argv) {
  g_thread_multiple = argc > 1 && std::string(argv[1]) == "--thread-multiple";
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, g_thread_multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE,
                  &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  CHECK(!g_thread_multiple || provided == MPI_THREAD_MULTIPLE,
        "this MPI does not provide MPI_THREAD_MULTIPLE");
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  Setup();
  Run();
  RetentionKeepsTheNewestGlobalCommit();
  int failures = g_failures;
  MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) {
    if (failures == 0 && std::system(("rm -rf '" + g_root + "'").c_str()) != 0) {
      std::fprintf(stderr, "could not remove %s\n", g_root.c_str());
    }
    std::printf("mpi background: %s (%d failures)\n", failures == 0 ? "ok" : "FAILED", failures);
  }
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
