// cairn-bench-mpi's phases (mpi_phases.hpp).
#include "mpi/mpi_phases.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "cairn/group.hpp"
#include "driver/bench.hpp"

namespace cairn::bench {

namespace {

Status Errno(const std::string& what, const std::string& path) {
  return Status::Io(what + " " + path + ": " + std::strerror(errno));
}

}  // namespace

double MemcpyPhase(uint8_t* dst, const uint8_t* src, size_t n) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = Clock::now();
  std::memcpy(dst, src, n);
  const auto t1 = Clock::now();
  // Keeps the copy from being elided.
  volatile uint8_t sink = dst[n / 2];
  (void)sink;
  return Seconds(t0, t1);
}

Result<CaptureFigures> CapturePhase(Client& client, int64_t version, uint64_t poll_us) {
  MPI_Barrier(MPI_COMM_WORLD);
  CaptureFigures f;
  const auto t0 = Clock::now();
  Status s = client.Checkpoint("bench", version);
  f.blocking_s = Seconds(t0, Clock::now());
  if (!s.ok()) return s.WithContext("checkpoint " + std::to_string(version));
  // The wait is bounded: a commit that never comes is an error, not a hang.
  const auto deadline = Clock::now() + std::chrono::minutes(5);
  for (;;) {
    CAIRN_ASSIGN_OR_RETURN(GlobalCommitState st, ProgressGlobalCommit(client, "bench"));
    if (st.global_version >= version) {
      f.local_commit_ns = st.local_version == version ? st.local_commit_ns : -1;
      f.record_ns = st.global_record_ns;
      f.learned_ns = st.global_learned_ns;
      return f;
    }
    if (Clock::now() > deadline) {
      return Status::Io("version " + std::to_string(version) +
                        " was not globally committed within 5 minutes");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(poll_us));
  }
}

Result<double> SyncPhase(const std::string& path, const uint8_t* data, size_t n, bool fsync) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = Clock::now();
  Status s;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) s = Errno("open", path);
  for (size_t at = 0; s.ok() && at < n;) {
    const ssize_t w = ::write(fd, data + at, n - at);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      s = Errno("write", path);
      break;
    }
    at += static_cast<size_t>(w);
  }
  if (s.ok() && fsync && ::fsync(fd) != 0) s = Errno("fsync", path);
  if (fd >= 0 && ::close(fd) != 0 && s.ok()) s = Errno("close", path);
  // Every rank reaches the barrier, failed or not: the job stays in step.
  MPI_Barrier(MPI_COMM_WORLD);
  const double blocked = Seconds(t0, Clock::now());
  if (!s.ok()) return s;
  return blocked;
}

std::string RunDir(const std::string& dir, const char* stem) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char made[4096] = {0};
  if (rank == 0) {
    const char* tmp = std::getenv("TMPDIR");
    std::string d =
        dir.empty() ? std::string(tmp && *tmp ? tmp : "/tmp") + "/" + stem + ".XXXXXX" : dir;
    if (dir.empty() ? mkdtemp(d.data()) == nullptr
                    : std::system(("mkdir -p '" + d + "'").c_str()) != 0) {
      std::fprintf(stderr, "cairn-bench-mpi: cannot create the run's directory %s\n", d.c_str());
      d.clear();
    }
    std::snprintf(made, sizeof made, "%s", d.c_str());
  }
  MPI_Bcast(made, sizeof made, MPI_CHAR, 0, MPI_COMM_WORLD);
  return made;
}

void Publish(const std::string& text, const std::string& json_path) {
  std::fputs(text.c_str(), stdout);
  if (json_path.empty()) return;
  std::ofstream out(json_path);
  out << text;
  if (!out) std::fprintf(stderr, "cairn-bench-mpi: cannot write %s\n", json_path.c_str());
}

void RemoveRunDir(const std::string& root, bool made) {
  MPI_Barrier(MPI_COMM_WORLD);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0 && made && std::system(("rm -rf '" + root + "'").c_str()) != 0) {
    std::fprintf(stderr, "cairn-bench-mpi: could not remove %s\n", root.c_str());
  }
}

}  // namespace cairn::bench
