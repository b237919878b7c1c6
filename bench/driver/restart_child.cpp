// The restart as users know it: a new process that opens the library on the
// files a previous process left, finds the newest version, restores it and
// checks it, with the files' pages dropped from the page cache first.
//
// Parent (ColdRestartTrial, after the restart trial closed its client or
// store):
//   1. drop the page cache of every file under the library's directories:
//      fdatasync + posix_fadvise(DONTNEED) per file, and as root also
//      sync + "1" > /proc/sys/vm/drop_caches when that is writable; then
//      count what is still resident (mincore), which the JSON reports;
//   2. spawn this binary as "cairn-bench restart-child ..." and wait for it;
//      spawn -> exit is timed here, the steps inside the child are
//      timestamps of CLOCK_MONOTONIC (steady_clock), which every process of
//      the machine shares, so they are differences to the spawn too;
//   3. read the newest version's data file raw (O_DIRECT when the file
//      system allows it, and buffered after dropping it again), keeping the
//      faster: the cold-read limit of the same file.
// Child (RunRestartChild): allocates and touches its application buffer,
// opens (Client::Open with the trial's configuration, or the baseline's
// directory), RestoreLatest (Protect first: finding the newest version and
// restoring it are one pass over its file, so "found" is stamped right after
// the open and cold_latest_s is ~0; the baseline still lists, then reads),
// downloads and verifies every byte, writes "key value" lines to
// --child-report, exits 0 (ok) or 1.
#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "driver/bench.hpp"
#include "cairn/cairn.hpp"
#include "common/files.hpp"
#include "driver/bench_buffer.hpp"
#include "common/pattern.hpp"
#include "driver/restart.hpp"
#include "driver/sync_baseline.hpp"
#include "driver/trial.hpp"

extern char** environ;

namespace cairn::bench {
namespace {

constexpr size_t kReadChunk = 4u << 20;

double Now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

// Regular files under `dir`, recursively (missing directory: none).
void ListFiles(const std::string& dir, std::vector<std::string>& out) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    const std::string path = dir + "/" + n;
    struct stat sb {};
    if (::lstat(path.c_str(), &sb) != 0) continue;
    if (S_ISDIR(sb.st_mode))
      ListFiles(path, out);
    else if (S_ISREG(sb.st_mode))
      out.push_back(path);
  }
  ::closedir(d);
}

// Writes back and drops the pages of `path` (best effort).
void DropFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fdatasync(fd);  // DONTNEED leaves dirty pages in place
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// Bytes of `path` in the page cache.
uint64_t ResidentBytes(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  struct stat sb {};
  uint64_t resident = 0;
  if (::fstat(fd, &sb) == 0 && sb.st_size > 0) {
    const size_t n = static_cast<size_t>(sb.st_size);
    void* p = ::mmap(nullptr, n, PROT_READ, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) {
      const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
      std::vector<unsigned char> vec((n + page - 1) / page);
      if (::mincore(p, n, vec.data()) == 0) {
        for (unsigned char v : vec) resident += (v & 1) ? page : 0;
      }
      ::munmap(p, n);
    }
  }
  ::close(fd);
  return std::min<uint64_t>(resident, static_cast<uint64_t>(sb.st_size));
}

// Drops the page cache of every file under `dirs`; returns how
// ("drop_caches" or "fadvise") and adds what stayed resident to `resident`.
std::string DropCaches(const std::vector<std::string>& dirs, uint64_t& resident) {
  std::vector<std::string> files;
  for (const std::string& d : dirs) ListFiles(d, files);
  for (const std::string& f : files) DropFile(f);
  std::string how = "fadvise";
  if (::geteuid() == 0) {
    ::sync();
    const int fd = ::open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      if (::write(fd, "1", 1) == 1) how = "drop_caches";
      ::close(fd);
    }
  }
  resident = 0;
  for (const std::string& f : files) resident += ResidentBytes(f);
  return how;
}

// The newest version's data file: the baseline's restart.v<version>, or
// Cairn's newest "<dir>/restart/v<20 digits>.cairn" (docs/format.md 3.1).
std::string DataFile(bool async, const std::string& lib_dir, int64_t version) {
  if (!async) return lib_dir + "/" + VersionFile(version);
  std::vector<std::string> files;
  ListFiles(lib_dir + "/" + kRestartName, files);
  std::string best;
  for (const std::string& f : files) {
    const bool data = f.size() > 6 && f.compare(f.size() - 6, 6, ".cairn") == 0 &&
                      f.find("/.") == std::string::npos;  // not a temp file
    if (data && f > best) best = f;
  }
  return best;
}

// Seconds to read `path` whole from a cold page cache; nullopt when it cannot
// (O_DIRECT refused, I/O error).
std::optional<double> RawColdRead(const std::string& path, bool direct, uint8_t* buf) {
  Result<ReadTiming> t = TimedColdRead(path, buf, kReadChunk, direct);
  return t.ok() ? std::optional<double>(t->seconds) : std::nullopt;
}

// The raw cold read of `file` (the one the child restored from), the limit a
// restore from disk has: O_DIRECT, and buffered after dropping its pages; the
// faster goes into cold.raw_read_*.
void MeasureRawColdRead(const std::string& file, ColdRestart& cold) {
  struct stat sb {};
  if (file.empty() || ::stat(file.c_str(), &sb) != 0) return;
  cold.file_bytes = static_cast<uint64_t>(sb.st_size);
  Result<Buffer> buf = AllocateBuffer(kReadChunk);
  if (!buf.ok()) return;
  for (bool direct : {true, false}) {
    std::optional<double> s = RawColdRead(file, direct, buf->get());
    if (!s || *s <= 0) continue;
    const double gbps = static_cast<double>(cold.file_bytes) / *s / 1e9;
    if (gbps > cold.raw_read_gbps) {
      cold.raw_read_gbps = gbps;
      cold.raw_read_method = direct ? "direct" : "buffered";
    }
  }
}

// The fraction as text that parses back to the same double.
std::string FractionText(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", f);
  return buf;
}

// The child's command line: the trial's options that shape the library and
// the buffer, plus the --child-* ones.
std::vector<std::string> ChildArgs(const Options& o, const char* lib, const std::string& lib_dir,
                                   int64_t version, uint64_t salt, const std::string& report,
                                   bool touch = true) {
  auto on = [](bool b) { return std::string(b ? "on" : "off"); };
  std::vector<std::string> a = {"cairn-bench", "restart-child", "--quiet"};
  auto add = [&](const char* name, std::string value) {
    a.emplace_back(name);
    a.push_back(std::move(value));
  };
  add("--child-lib", lib);
  add("--child-touch", on(touch));
  add("--child-salt", std::to_string(salt));
  add("--child-version", std::to_string(version));
  add("--child-dir", lib_dir);
  add("--child-report", report);
  add("--size", std::to_string(o.size));
  add("--host-cache", std::to_string(o.host_cache));
  add("--init", CacheInitName(o.init));
  add("--pin", on(o.pin));
  add("--huge-pages", on(o.huge_pages));
  add("--app-huge-pages", on(o.app_huge_pages));
  add("--memory", MemoryKindName(o.memory));
  add("--device-cache", std::to_string(o.device_cache));
  add("--device-cache-init", DeviceCacheInitName(o.device_cache_init));
  if (o.block_size) add("--block-size", std::to_string(*o.block_size));
  if (o.device_map_chunk) add("--device-map-chunk", std::to_string(*o.device_map_chunk));
  if (!o.persistent_dir.empty()) add("--persistent", o.persistent_dir);
  add("--changes", ChangeDetectionName(o.changes));
  add("--change-fraction", FractionText(o.change.fraction));
  add("--change-pattern", ChangePatternName(o.change.pattern));
  if (o.max_layers) add("--max-layers", std::to_string(*o.max_layers));
  for (const std::string& set : o.config_sets) add("--set", set);
  return a;
}

std::map<std::string, std::string> ReadReport(const std::string& path) {
  std::map<std::string, std::string> kv;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t sp = line.find(' ');
    if (sp != std::string::npos) kv[line.substr(0, sp)] = line.substr(sp + 1);
  }
  return kv;
}

// A finished child: its report and how it ended.
struct Child {
  Status status;  // ok: exited 0
  double spawned = 0, process_s = 0;
  std::map<std::string, std::string> kv;
  double At(const char* key) const {
    auto it = kv.find(key);
    return it == kv.end() ? 0.0 : std::strtod(it->second.c_str(), nullptr);
  }
};

// Spawns this binary with `args` and waits for it; `who` names it in errors.
Child SpawnChild(std::vector<std::string> args, const std::string& report, const std::string& who) {
  Child c;
  ::unlink(report.c_str());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  c.spawned = Now();
  pid_t pid = 0;
  const int err = ::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ);
  if (err != 0) {
    c.status = ErrnoStatus(err, "posix_spawn", "/proc/self/exe").WithContext(who);
    return c;
  }
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  c.process_s = Now() - c.spawned;
  c.kv = ReadReport(report);
  ::unlink(report.c_str());
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    auto e = c.kv.find("error");
    c.status =
        Status::Internal(who + ": the new process " +
                         (WIFEXITED(wstatus) ? "exited " + std::to_string(WEXITSTATUS(wstatus))
                                             : std::string("was killed")) +
                         (e == c.kv.end() ? std::string() : ": " + e->second));
  }
  return c;
}

// --whole-restart: Cairn's child into an untouched buffer, then the raw
// programs (O_DIRECT and buffered reads straight into theirs), each from
// dropped caches; spawn -> restored.
Status WholeRestart(const Options& o, const std::string& lib_dir,
                    const std::vector<std::string>& lib_dirs, int64_t version, uint64_t salt,
                    ColdRestart& cold) {
  const std::string report = lib_dir + ".whole-report";
  uint64_t resident = 0;
  // Which goes first alternates with the trial (see ColdRestartTrial on order).
  const bool cairn_first = salt % 2 == 0;
  const char* order[] = {cairn_first ? "cairn" : "raw-direct", "raw-buffered",
                         cairn_first ? "raw-direct" : "cairn"};
  for (const char* lib : order) {
    (void)DropCaches(lib_dirs, resident);
    const std::string who = std::string("whole restart (") + lib + ")";
    Child c = SpawnChild(ChildArgs(o, lib, lib_dir, version, salt, report, false), report, who);
    if (!c.status.ok()) return c.status;
    const double s = c.At("restored") - c.spawned;
    if (lib[0] == 'c') {
      cold.whole_s = s;
    } else if (cold.whole_raw_s == 0 || s < cold.whole_raw_s) {
      cold.whole_raw_s = s;
      cold.whole_raw_method = lib + 4;
    }
  }
  return Status::Ok();
}

}  // namespace

void ColdRestartTrial(const Options& o, bool async, const std::string& lib_dir,
                      const std::vector<std::string>& lib_dirs, int64_t version, uint64_t salt,
                      TrialResult& r) {
  ColdRestart cold;
  // The raw reads run both before and after the child, and the fastest
  // counts: on a VM that hands freed memory back to its host, whichever read
  // comes first fills the page cache from fresher (slower) memory than the
  // one after it, so one fixed order would favour one side.
  const std::string data_file = DataFile(async, lib_dir, version);
  MeasureRawColdRead(data_file, cold);
  cold.cache_drop = DropCaches(lib_dirs, cold.resident_bytes);
  const std::string report = lib_dir + ".child-report";
  const std::string who = std::string("cold restart (") + (async ? "cairn" : "sync") + ")";
  Child child = SpawnChild(ChildArgs(o, async ? "cairn" : "sync", lib_dir, version, salt, report),
                           report, who);
  cold.process_s = child.process_s;
  if (!child.status.ok()) {
    r.status = child.status;
    auto w = child.kv.find("wrong");
    if (w != child.kv.end()) r.verify.Fail(who + ": " + w->second);
    return;
  }
  auto at = [&](const char* key) { return child.At(key); };
  const double spawned = child.spawned;
  cold.start_s = at("started") - spawned;
  cold.open_s = at("opened") - at("started");
  cold.latest_s = at("found") - at("opened");
  cold.restore_s = at("restored") - at("found");
  cold.verify_s = at("verify_s");
  cold.restored_s = at("restored") - spawned;
  cold.version = static_cast<int64_t>(at("version"));
  r.verify.checks += 1;
  r.verify.bytes_compared += static_cast<uint64_t>(at("bytes_compared"));

  MeasureRawColdRead(data_file, cold);
  if (o.whole_restart && async) {
    if (Status st = WholeRestart(o, lib_dir, lib_dirs, version, salt, cold); !st.ok()) {
      r.status = st;
      return;
    }
  }
  r.cold = std::move(cold);
}

namespace {

// The child's work; the report gets the timestamps as it goes.
// The raw program of --whole-restart: allocates a buffer as large as the
// newest version's data file and reads the file into it, straight, in
// kReadChunk pieces (O_DIRECT or buffered): the least a restart can do.
Status ChildRawRead(const Options& o, std::ofstream& rep) {
  rep << "started " << Now() << "\n";
  const std::string path = DataFile(true, o.child_lib_dir, o.child_version);
  struct stat sb {};
  if (path.empty() || ::stat(path.c_str(), &sb) != 0) {
    return Status::NotFound("raw restart: no data file under " + o.child_lib_dir);
  }
  const size_t bytes = static_cast<size_t>(sb.st_size);
  CAIRN_ASSIGN_OR_RETURN(Buffer buf, AllocateBuffer(bytes + kReadChunk));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (o.child_raw_direct ? O_DIRECT : 0));
  if (fd < 0) return ErrnoStatus(errno, "open", path);
  Status st;
  for (size_t done = 0; done < bytes && st.ok();) {
    Result<size_t> got = ReadAll(fd, buf.get() + done, kReadChunk, done, path);
    if (!got.ok())
      st = got.status();
    else if (*got == 0)
      break;
    else
      done += *got;
  }
  ::close(fd);
  CAIRN_RETURN_IF_ERROR(st);
  rep << "restored " << Now() << "\n";
  return Status::Ok();
}

Status ChildRestore(const Options& o, std::ofstream& rep, VerifyStats& verify) {
  if (o.child_raw) return ChildRawRead(o, rep);
  CAIRN_ASSIGN_OR_RETURN(BenchBuffer app,
                         BenchBuffer::Allocate(o.memory, o.size, o.app_huge_pages,
                                               UsesTrackedMemory(o), o.child_touch));
  rep << "started " << Now() << "\n";
  int64_t version = -1;
  if (o.child_async) {
    Config config = MakeConfig(o, o.child_lib_dir);
    // CAIRN_TRACE holds the trials' timeline; the new process's goes next to it.
    if (!config.trace_path.empty()) config.trace_path += ".cold-restart";
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<Client> client, Client::Open(config));
    rep << "opened " << Now() << "\n";
    rep << "found " << Now() << "\n";
    CAIRN_RETURN_IF_ERROR(client->Protect(0, app.app(), o.size));
    CAIRN_ASSIGN_OR_RETURN(version, client->RestoreLatest(kRestartName));
    rep << "restored " << Now() << "\n";
    CAIRN_RETURN_IF_ERROR(client->Close());
  } else {
    CAIRN_ASSIGN_OR_RETURN(
        SyncStore store,
        SyncStore::Open(o.child_lib_dir, false, o.memory == MemoryKind::kHost ? 0 : o.size));
    rep << "opened " << Now() << "\n";
    CAIRN_ASSIGN_OR_RETURN(version, SyncLatest(store));
    rep << "found " << Now() << "\n";
    CAIRN_ASSIGN_OR_RETURN(size_t got, store.Read(VersionFile(version), app, o.size, false));
    if (got != o.size) {
      return Status::SizeMismatch(VersionFile(version) + ": " + std::to_string(got) + " bytes");
    }
    rep << "restored " << Now() << "\n";
  }
  // Verification is the bench's, after the restore is timed (Close included
  // above for Cairn: it is part of the process's life, not of the restore).
  CAIRN_RETURN_IF_ERROR(app.Download(o.size));
  const double t = Now();
  if (version != o.child_version) {
    verify.Fail("latest found version " + std::to_string(version) + ", expected " +
                std::to_string(o.child_version));
  } else {
    // --child-verify-as (tests): expect another version's content.
    VerifyVersion(o, app.host(), o.child_salt, o.child_verify_as.value_or(version), true, verify);
  }
  rep << "verified " << Now() << "\n"
      << "verify_s " << Now() - t << "\n"
      << "version " << version << "\n"
      << "bytes_compared " << verify.bytes_compared << "\n";
  return Status::Ok();
}

}  // namespace

int RunRestartChild(const Options& o) {
  std::ofstream rep(o.child_report);
  rep.precision(17);
  VerifyStats verify;
  Status st = ChildRestore(o, rep, verify);
  if (!st.ok()) rep << "error " << st.ToString() << "\n";
  if (!verify.errors.empty()) rep << "wrong " << verify.errors.front() << "\n";
  rep.flush();
  if (!rep) {
    std::fprintf(stderr, "cairn-bench restart-child: cannot write %s\n", o.child_report.c_str());
    return 1;
  }
  return st.ok() && verify.mismatches == 0 ? 0 : 1;
}

}  // namespace cairn::bench
