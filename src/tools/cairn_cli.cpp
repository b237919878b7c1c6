// `cairn`: inspect, verify and clean a Cairn directory (docs/format.md).
//
//   cairn ls DIR                        every file of every name, with its state
//   cairn verify DIR [NAME [VERSION]]   read and check every block
//   cairn info DIR NAME VERSION         one version's metadata as JSON
//   cairn gc DIR --keep N [...]         remove old versions and stale temps
//
// Exit status: 0 success (all files ok), 1 damage found or an operation
// failed, 2 bad command line. Errors go to stderr; results to stdout.
// All file access goes through os::FileSystem::Default().
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "format/file_reader.hpp"
#include "format/naming.hpp"
#include "os/fs.hpp"

namespace cairn::cli {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

constexpr const char* kUsage =
    "usage: cairn COMMAND DIR [ARGS]\n"
    "\n"
    "DIR is a Cairn scratch or persistent directory (one subdirectory per name).\n"
    "\n"
    "  cairn ls DIR\n"
    "      List every file: name, kind (version/step), number, size and state:\n"
    "      ok, damaged (header, footer or tables fail their checks), or temp\n"
    "      (a file being written; pid alive, or dead = left by a crash).\n"
    "  cairn verify DIR [NAME [VERSION]]\n"
    "      Read every block of the matching committed files and check its CRC32C.\n"
    "      One line per file: \"PATH: ok\" or what is damaged, naming the block.\n"
    "  cairn info DIR NAME VERSION\n"
    "      Print one version's metadata and regions as JSON.\n"
    "  cairn gc DIR --keep N [--min-temp-age SECONDS] [--dry-run]\n"
    "      For each name, keep the N (>= 1) newest versions whose header, footer\n"
    "      and tables check out, and remove the older versions. Damaged versions\n"
    "      newer than those are kept for inspection. Also removes temp files of\n"
    "      dead processes older than SECONDS (default 3600: a pid says nothing\n"
    "      about a file written by another node into a shared directory).\n"
    "      History steps (h*.cairn) are never touched.\n"
    "  cairn help\n"
    "\n"
    "Exit status: 0 success, 1 damage found or an operation failed, 2 usage error.\n";

int Usage(const std::string& error) {
  if (!error.empty()) std::fprintf(stderr, "cairn: %s\n\n", error.c_str());
  std::fputs(kUsage, stderr);
  return kExitUsage;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "cairn: %s\n", message.c_str());
  return kExitFailed;
}

bool ParseInt(std::string_view s, int64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

// kill(pid, 0) succeeds, or fails with EPERM, when the process exists.
bool PidAlive(long pid) { return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM; }

const char* KindWord(format::EntryKind k) {
  return k == format::EntryKind::kCheckpoint ? "version" : "step";
}

const char* MemoryWord(MemoryKind m) {
  switch (m) {
    case MemoryKind::kHost: return "host";
    case MemoryKind::kDevice: return "device";
    case MemoryKind::kManaged: return "managed";
  }
  return "unknown";
}

// A file of the store, classified by its name.
struct StoreFile {
  std::string name;  // the entry's name (its directory)
  std::string path;
  format::EntryKind kind = format::EntryKind::kCheckpoint;
  int64_t number = 0;
  bool temp = false;
  long pid = 0;  // temp files only
};

// The valid names in dir, sorted. Subdirectories that are not valid names
// are not Cairn's and are skipped.
Result<std::vector<std::string>> ListNames(os::FileSystem* fs, const std::string& dir) {
  CAIRN_ASSIGN_OR_RETURN(auto entries, fs->List(dir));
  std::vector<std::string> names;
  for (const os::DirEntry& e : entries) {
    if (e.is_dir && format::ValidateName(e.name).ok()) names.push_back(e.name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Committed and temp files of one name, ordered by kind, then number.
// Foreign files are skipped.
Result<std::vector<StoreFile>> ListFiles(os::FileSystem* fs, const std::string& dir,
                                         const std::string& name) {
  const std::string name_dir = os::JoinPath(dir, name);
  CAIRN_ASSIGN_OR_RETURN(auto entries, fs->List(name_dir));
  std::vector<StoreFile> files;
  for (const os::DirEntry& e : entries) {
    if (e.is_dir) continue;
    StoreFile f;
    f.name = name;
    f.path = os::JoinPath(name_dir, e.name);
    std::string_view committed = e.name;
    if (format::IsTempFileName(e.name, &f.pid)) {
      f.temp = true;
      committed = committed.substr(1, committed.rfind('.', committed.size() - 5) - 1);
    }
    auto parsed = format::ParseEntryFileName(committed);
    if (!parsed) continue;
    f.kind = parsed->kind;
    f.number = parsed->number;
    files.push_back(std::move(f));
  }
  std::sort(files.begin(), files.end(), [](const StoreFile& a, const StoreFile& b) {
    if (a.kind != b.kind) return a.kind < b.kind;
    if (a.number != b.number) return a.number < b.number;
    return a.temp < b.temp;
  });
  return files;
}

// A one-line description naming the path exactly once: format errors start
// with it ("PATH: block 3 ..."), OS errors contain it ("open PATH: ...").
std::string Describe(const std::string& path, const Status& s) {
  if (s.message().rfind(path, 0) == 0) return s.message();
  if (s.message().find(path) != std::string::npos) return s.ToString();
  return path + ": " + s.ToString();
}

// ---- ls ---------------------------------------------------------------------

int Ls(os::FileSystem* fs, const std::string& dir) {
  auto names = ListNames(fs, dir);
  if (!names.ok()) return Fail(names.status().ToString());
  struct Row {
    std::string name, kind, number, size, state;
  };
  std::vector<Row> rows;
  rows.push_back({"NAME", "KIND", "NUMBER", "BYTES", "STATE"});
  for (const std::string& name : *names) {
    auto files = ListFiles(fs, dir, name);
    if (!files.ok()) return Fail(files.status().ToString());
    for (const StoreFile& f : *files) {
      Row row{name, KindWord(f.kind), std::to_string(f.number), "-", "ok"};
      auto st = fs->Stat(f.path);
      if (!st.ok()) continue;  // removed since the listing
      row.size = std::to_string(st->size);
      if (f.temp) {
        row.state = "temp (pid " + std::to_string(f.pid) + (PidAlive(f.pid) ? " alive)" : " dead)");
      } else if (auto r = format::FileReader::Open(fs, f.path); !r.ok()) {
        if (r.status().code() == Code::kNotFound) continue;
        std::string what = r.status().message();
        if (what.rfind(f.path + ": ", 0) == 0) what.erase(0, f.path.size() + 2);  // row names it
        row.state = "damaged: " + what;
      }
      rows.push_back(std::move(row));
    }
  }
  size_t w[4] = {0, 0, 0, 0};
  for (const Row& r : rows) {
    w[0] = std::max(w[0], r.name.size());
    w[1] = std::max(w[1], r.kind.size());
    w[2] = std::max(w[2], r.number.size());
    w[3] = std::max(w[3], r.size.size());
  }
  for (const Row& r : rows) {
    std::printf("%-*s  %-*s  %*s  %*s  %s\n", static_cast<int>(w[0]), r.name.c_str(),
                static_cast<int>(w[1]), r.kind.c_str(), static_cast<int>(w[2]), r.number.c_str(),
                static_cast<int>(w[3]), r.size.c_str(), r.state.c_str());
  }
  return kExitOk;
}

// ---- verify -----------------------------------------------------------------

int Verify(os::FileSystem* fs, const std::string& dir, const std::vector<std::string>& args) {
  std::vector<std::string> names;
  if (args.empty()) {
    auto all = ListNames(fs, dir);
    if (!all.ok()) return Fail(all.status().ToString());
    names = std::move(all).value();
  } else {
    if (Status s = format::ValidateName(args[0]); !s.ok()) return Usage(s.message());
    names.push_back(args[0]);
  }
  int64_t version = -1;
  if (args.size() == 2 && !ParseInt(args[1], &version)) {
    return Usage("bad version '" + args[1] + "'");
  }

  std::vector<std::string> paths;
  if (version >= 0) {
    paths.push_back(format::EntryPath(dir, names[0], format::EntryKind::kCheckpoint, version));
    if (auto st = fs->Stat(paths[0]); !st.ok()) return Fail(st.status().ToString());
  } else {
    for (const std::string& name : names) {
      auto files = ListFiles(fs, dir, name);
      if (!files.ok()) return Fail(files.status().ToString());
      for (const StoreFile& f : *files) {
        if (!f.temp) paths.push_back(f.path);
      }
    }
  }

  int damaged = 0, verified = 0;
  for (const std::string& path : paths) {
    auto reader = format::FileReader::Open(fs, path);
    Status s = reader.ok() ? (*reader)->VerifyAll() : reader.status();
    if (s.code() == Code::kNotFound && paths.size() > 1) {
      std::printf("%s: removed while verifying\n", path.c_str());
      continue;
    }
    ++verified;
    if (s.ok()) {
      std::printf("%s: ok\n", path.c_str());
    } else {
      ++damaged;
      std::printf("%s\n", Describe(path, s).c_str());
    }
  }
  std::printf("%d file%s verified, %d damaged\n", verified, verified == 1 ? "" : "s", damaged);
  return damaged == 0 ? kExitOk : kExitFailed;
}

// ---- info -------------------------------------------------------------------

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

int Info(os::FileSystem* fs, const std::string& dir, const std::string& name,
         const std::string& version_text) {
  if (Status s = format::ValidateName(name); !s.ok()) return Usage(s.message());
  int64_t version = 0;
  if (!ParseInt(version_text, &version)) return Usage("bad version '" + version_text + "'");
  const std::string path = format::EntryPath(dir, name, format::EntryKind::kCheckpoint, version);
  auto reader = format::FileReader::Open(fs, path);
  if (!reader.ok()) return Fail(Describe(path, reader.status()));
  const format::FileReader& r = **reader;
  const format::Layout& l = r.layout();
  std::printf("{\n");
  std::printf("  \"name\": %s,\n", JsonString(r.info().name).c_str());
  std::printf("  \"version\": %lld,\n", static_cast<long long>(r.info().number));
  std::printf("  \"kind\": \"checkpoint\",\n");
  std::printf("  \"file\": %s,\n", JsonString(path).c_str());
  std::printf("  \"file_bytes\": %llu,\n", static_cast<unsigned long long>(r.file_bytes()));
  std::printf("  \"payload_bytes\": %llu,\n", static_cast<unsigned long long>(l.payload_bytes));
  std::printf("  \"block_bytes\": %u,\n", l.block_bytes);
  std::printf("  \"created_unix_ns\": %lld,\n", static_cast<long long>(r.info().created_unix_ns));
  std::printf("  \"format_version\": %u,\n", format::kFormatVersion);
  std::printf("  \"regions\": [");
  for (size_t i = 0; i < l.regions.size(); ++i) {
    const format::Layout::Region& reg = l.regions[i];
    std::printf("%s\n    {\"id\": %d, \"memory\": \"%s\", \"bytes\": %llu, \"blocks\": %u}",
                i == 0 ? "" : ",", reg.spec.id, MemoryWord(reg.spec.memory),
                static_cast<unsigned long long>(reg.spec.bytes), reg.block_count);
  }
  std::printf("%s]\n}\n", l.regions.empty() ? "" : "\n  ");
  return kExitOk;
}

// ---- gc -----------------------------------------------------------------------

int Gc(os::FileSystem* fs, const std::string& dir, const std::vector<std::string>& args) {
  int64_t keep = -1;
  int64_t min_temp_age_s = 3600;
  bool dry_run = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--dry-run") {
      dry_run = true;
    } else if (args[i] == "--keep" && i + 1 < args.size()) {
      if (!ParseInt(args[++i], &keep) || keep < 1) return Usage("--keep needs a number >= 1");
    } else if (args[i] == "--min-temp-age" && i + 1 < args.size()) {
      if (!ParseInt(args[++i], &min_temp_age_s)) return Usage("--min-temp-age needs seconds");
    } else {
      return Usage("gc: unexpected argument '" + args[i] + "'");
    }
  }
  if (keep < 1) return Usage("gc needs --keep N");

  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  auto names = ListNames(fs, dir);
  if (!names.ok()) return Fail(names.status().ToString());
  const char* verb = dry_run ? "would remove" : "removed";
  int failures = 0;
  auto remove = [&](const std::string& path, const std::string& why) {
    Status s = dry_run ? Status::Ok() : fs->Remove(path);
    if (s.ok() || s.code() == Code::kNotFound) {
      std::printf("%s %s (%s)\n", verb, path.c_str(), why.c_str());
    } else {
      ++failures;
      std::fprintf(stderr, "cairn: %s\n", s.ToString().c_str());
    }
  };
  for (const std::string& name : *names) {
    auto files = ListFiles(fs, dir, name);
    if (!files.ok()) return Fail(files.status().ToString());
    // Versions, newest first: keep until `keep` good ones are seen; all
    // older ones go, good or damaged.
    int64_t good = 0;
    for (auto it = files->rbegin(); it != files->rend(); ++it) {
      if (it->temp || it->kind != format::EntryKind::kCheckpoint) continue;
      if (good >= keep) {
        remove(it->path, "older than the newest " + std::to_string(keep) + " good version(s)");
      } else if (format::FileReader::Open(fs, it->path).ok()) {
        ++good;
      }
    }
    for (const StoreFile& f : *files) {
      if (!f.temp || PidAlive(f.pid)) continue;
      auto st = fs->Stat(f.path);
      if (!st.ok() || now_ns - st->mtime_ns < min_temp_age_s * 1000000000) continue;
      remove(f.path, "temp file of dead pid " + std::to_string(f.pid));
    }
  }
  return failures == 0 ? kExitOk : kExitFailed;
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return Usage("no command");
  const std::string cmd = args[0];
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  if (cmd != "ls" && cmd != "verify" && cmd != "info" && cmd != "gc") {
    return Usage("unknown command '" + cmd + "'");
  }
  if (args.size() < 2) return Usage(cmd + ": missing DIR");
  const std::string dir = args[1];
  const std::vector<std::string> rest(args.begin() + 2, args.end());
  os::FileSystem* fs = os::FileSystem::Default();
  if (auto st = fs->Stat(dir); !st.ok() || !st->is_dir) {
    return Fail(st.ok() ? dir + ": not a directory" : st.status().ToString());
  }
  if (cmd == "ls") return rest.empty() ? Ls(fs, dir) : Usage("ls takes only DIR");
  if (cmd == "verify") return rest.size() <= 2 ? Verify(fs, dir, rest) : Usage("verify: too many arguments");
  if (cmd == "info") return rest.size() == 2 ? Info(fs, dir, rest[0], rest[1]) : Usage("info needs NAME VERSION");
  return Gc(fs, dir, rest);
}

}  // namespace
}  // namespace cairn::cli

int main(int argc, char** argv) { return cairn::cli::Main(argc, argv); }
