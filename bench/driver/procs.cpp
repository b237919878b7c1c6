// --procs P: P copies of the benchmark at once on this node (HiPC'22 Fig. 6a,
// where processes compete for memory bandwidth and for pinning).
//
// The parent re-executes itself P times with --procs 1, each child with its
// own JSON file, stdout file and (when --dir was given) subdirectory. The
// children measure the machine limits, then meet at a barrier so that their
// trials start together: each writes one byte to the "ready" pipe and reads
// the "go" pipe, which the parent closes once all P are ready. The parent
// then prints each child's table and writes one JSON document
//   {"procs": P, "processes": [<child document>, ...]}
// whose children are the single-process documents unchanged.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "driver/bench.hpp"
#include "common/files.hpp"

namespace cairn::bench {
namespace {

constexpr const char* kBarrierEnv = "CAIRN_BENCH_BARRIER";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// argv without --procs/--json/--dir (and their values), for the children.
std::vector<std::string> ChildArgs(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool drop = false;
    for (const char* opt : {"--procs", "--json", "--dir"}) {
      const std::string o = opt;
      if (a == o) {
        drop = true;
        ++i;  // and its value
      } else if (a.rfind(o + "=", 0) == 0) {
        drop = true;
      }
    }
    if (!drop) out.push_back(a);
  }
  return out;
}

}  // namespace

void WaitAtBarrier() {
  const char* env = std::getenv(kBarrierEnv);
  if (env == nullptr) return;
  int ready = -1, go = -1;
  if (std::sscanf(env, "%d,%d", &ready, &go) != 2) return;
  const char byte = 1;
  (void)!::write(ready, &byte, 1);
  char buf;
  while (::read(go, &buf, 1) > 0) {
  }
  ::close(ready);
  ::close(go);
}

int RunProcesses(const Options& o, int argc, char** argv) {
  Result<std::string> tmp = MakeTempDir();
  if (!tmp.ok()) {
    std::fprintf(stderr, "cairn-bench: %s\n", tmp.status().ToString().c_str());
    return 1;
  }
  int ready[2], go[2];
  if (::pipe(ready) != 0 || ::pipe(go) != 0) {
    std::perror("cairn-bench: pipe");
    return 1;
  }
  const std::vector<std::string> base = ChildArgs(argc, argv);
  std::vector<pid_t> pids;
  for (int p = 0; p < o.procs; ++p) {
    std::vector<std::string> args = {argv[0]};
    args.insert(args.end(), base.begin(), base.end());
    args.insert(args.end(), {"--procs", "1", "--json", *tmp + "/proc-" + std::to_string(p) + ".json"});
    if (!o.dir.empty()) args.insert(args.end(), {"--dir", o.dir + "/proc-" + std::to_string(p)});
    const std::string out = *tmp + "/proc-" + std::to_string(p) + ".txt";
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("cairn-bench: fork");
      break;
    }
    if (pid == 0) {
      ::close(ready[0]);
      ::close(go[1]);
      const std::string fds = std::to_string(ready[1]) + "," + std::to_string(go[0]);
      ::setenv(kBarrierEnv, fds.c_str(), 1);
      const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd >= 0) ::dup2(fd, STDOUT_FILENO);
      std::vector<char*> cargs;
      for (std::string& a : args) cargs.push_back(a.data());
      cargs.push_back(nullptr);
      ::execv("/proc/self/exe", cargs.data());
      std::perror("cairn-bench: exec");
      ::_exit(1);
    }
    pids.push_back(pid);
  }
  ::close(ready[1]);
  ::close(go[0]);
  // Every child either reaches the barrier (one byte) or exits (its end of
  // the pipe closes); read until all bytes arrived or every writer is gone.
  char buf;
  for (size_t got = 0; got < pids.size() && ::read(ready[0], &buf, 1) > 0;) ++got;
  ::close(go[1]);  // go
  ::close(ready[0]);

  int rc = pids.size() == static_cast<size_t>(o.procs) ? 0 : 1;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    rc = code > rc ? code : rc;
  }
  std::string doc = "{\"procs\": " + std::to_string(o.procs) + ", \"processes\": [";
  for (size_t p = 0; p < pids.size(); ++p) {
    const std::string stem = *tmp + "/proc-" + std::to_string(p);
    std::printf("=== process %zu of %d ===\n%s\n", p + 1, o.procs, ReadAll(stem + ".txt").c_str());
    std::string child = ReadAll(stem + ".json");
    doc += (p ? ", " : "") + (child.empty() ? std::string("null") : child);
  }
  doc += "]}\n";
  if (!o.json_path.empty()) {
    std::ofstream out(o.json_path);
    out << doc;
    if (!out) {
      std::fprintf(stderr, "cairn-bench: --json: cannot write %s\n", o.json_path.c_str());
      rc = rc ? rc : 1;
    }
  }
  (void)RemoveTree(*tmp);
  return rc;
}

}  // namespace cairn::bench
