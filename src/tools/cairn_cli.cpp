// `cairn`: inspect, verify and clean a Cairn directory (docs/format.md).
//
//   cairn ls DIR                        every file of every name, with its state
//   cairn verify DIR [NAME [VERSION]]   read and check every block and chain
//   cairn info DIR NAME VERSION         one version's metadata as JSON
//   cairn compact DIR NAME VERSION      rewrite a layered version as a full one
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
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "format/chain.hpp"
#include "format/compact.hpp"
#include "format/file_reader.hpp"
#include "format/naming.hpp"
#include "format/placement.hpp"
#include "os/fs/fs.hpp"
#include "os/mem/numa.hpp"
#include "compat/peer_version.hpp"
#include "tools/cli_store.hpp"

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
    "      List every file: name, kind (version/step), number, size, layer depth\n"
    "      (0 = full version), logical and stored bytes, and state: ok, damaged\n"
    "      (header, footer or tables fail their checks), broken chain (a base is\n"
    "      missing or not the one referenced), or temp (a file being written;\n"
    "      pid alive, or dead = left by a crash). A version of the VELOC or FTI\n"
    "      API (number >= 2^32) adds the program's id: \"; drop-in id I, checkpoint N\".\n"
    "  cairn verify DIR [NAME [VERSION]]\n"
    "      Read every block of the matching committed files and check its CRC32C,\n"
    "      and check the chain of every layered version. One line per file:\n"
    "      \"PATH: ok\" or what is damaged, naming the block or the broken link\n"
    "      (\"v7 -> base v5: missing\"). Without NAME, a DIR that holds no Cairn\n"
    "      file is searched for Cairn directories below it (3 levels); finding\n"
    "      no file to verify is an error.\n"
    "  cairn info DIR NAME VERSION\n"
    "      Print one version's metadata, regions and base reference as JSON.\n"
    "  cairn compact DIR NAME VERSION\n"
    "      Rewrite a layered version as a full version with the same content\n"
    "      (temp file, fsync, atomic rename over it): it no longer needs its\n"
    "      bases, and versions built on it stay valid.\n"
    "  cairn gc DIR --keep N [--min-temp-age SECONDS] [--dry-run]\n"
    "      For each name, keep the N (>= 1) newest versions whose header, footer\n"
    "      and tables check out, with those of their whole chains, and the bases\n"
    "      their chains need, and remove the\n"
    "      older versions. Damaged versions newer than those are kept for\n"
    "      inspection. Also removes temp files of\n"
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

// ---- ls ---------------------------------------------------------------------

struct LsRow {
  std::string name, kind, number, size, depth = "-", logical = "-", stored = "-", state = "ok";
};

// A checkpoint of libcairn_veloc or libcairn_fti (a number of 2^32 or more,
// docs/format.md 3.10): the peer's id and the checkpoint's count, after the
// state, so that `ls` names versions as the program that wrote them does.
std::string PeerNote(const StoreFile& f) {
  if (f.kind != format::EntryKind::kCheckpoint || compat::PeerSequence(f.number) == 0) return "";
  return "; drop-in id " + std::to_string(compat::PeerId(f.number)) + ", checkpoint " +
         std::to_string(compat::PeerSequence(f.number));
}

// Depth, sizes and state of one committed file (headers and tables only);
// false when the file is gone.
bool DescribeFile(os::FileSystem* fs, const std::string& dir, const StoreFile& f, LsRow* row) {
  auto r = format::FileReader::Open(fs, f.path);
  if (!r.ok()) {
    if (r.status().code() == Code::kNotFound) return false;
    row->state = "damaged: " + StripPath(f.path, r.status().message());
    return true;
  }
  const format::Layout& l = (*r)->layout();
  row->depth = std::to_string((*r)->record().depth);
  row->logical = std::to_string(l.payload_bytes);
  row->stored = std::to_string(l.stored_bytes);
  if (!(*r)->record().layered()) return true;
  auto chain = format::Chain::Open(fs, dir, f.name, f.number, f.kind);
  if (!chain.ok()) row->state = "broken chain: " + StripPath(f.path, chain.status().message());
  return true;
}

int Ls(os::FileSystem* fs, const std::string& dir) {
  auto names = ListNames(fs, dir);
  if (!names.ok()) return Fail(names.status().ToString());
  std::vector<LsRow> rows;
  rows.push_back({"NAME", "KIND", "NUMBER", "BYTES", "DEPTH", "LOGICAL", "STORED", "STATE"});
  for (const std::string& name : *names) {
    auto files = ListFiles(fs, dir, name);
    if (!files.ok()) return Fail(files.status().ToString());
    for (const StoreFile& f : *files) {
      LsRow row{name, KindWord(f.kind), std::to_string(f.number), "-"};
      auto st = fs->Stat(f.path);
      if (!st.ok()) continue;  // removed since the listing
      row.size = std::to_string(st->size);
      if (f.temp) {
        row.state = "temp (pid " + std::to_string(f.pid) + (PidAlive(f.pid) ? " alive)" : " dead)");
      } else {
        if (!DescribeFile(fs, dir, f, &row)) continue;  // removed since the listing
      }
      row.state += PeerNote(f);
      rows.push_back(std::move(row));
    }
  }
  size_t w[7] = {0, 0, 0, 0, 0, 0, 0};
  for (const LsRow& r : rows) {
    const std::string* cols[7] = {&r.name,  &r.kind,    &r.number, &r.size,
                                  &r.depth, &r.logical, &r.stored};
    for (int i = 0; i < 7; ++i) w[i] = std::max(w[i], cols[i]->size());
  }
  for (const LsRow& r : rows) {
    std::printf("%-*s  %-*s  %*s  %*s  %*s  %*s  %*s  %s\n", static_cast<int>(w[0]),
                r.name.c_str(), static_cast<int>(w[1]), r.kind.c_str(), static_cast<int>(w[2]),
                r.number.c_str(), static_cast<int>(w[3]), r.size.c_str(), static_cast<int>(w[4]),
                r.depth.c_str(), static_cast<int>(w[5]), r.logical.c_str(),
                static_cast<int>(w[6]), r.stored.c_str(), r.state.c_str());
  }
  return kExitOk;
}

// ---- verify -----------------------------------------------------------------

int Verify(os::FileSystem* fs, const std::string& dir, const std::vector<std::string>& args) {
  if (!args.empty()) {
    if (Status s = format::ValidateName(args[0]); !s.ok()) return Usage(s.message());
  }
  int64_t version = -1;
  if (args.size() == 2 && !ParseInt(args[1], &version)) {
    return Usage("bad version '" + args[1] + "'");
  }
  // The files to check, with the Cairn directory each belongs to.
  std::vector<std::pair<std::string, StoreFile>> todo;
  if (version >= 0) {
    StoreFile f{args[0], format::EntryPath(dir, args[0], format::EntryKind::kCheckpoint, version)};
    f.number = version;
    if (auto st = fs->Stat(f.path); !st.ok()) return Fail(st.status().ToString());
    todo.emplace_back(dir, f);
  } else {
    std::vector<std::string> dirs;
    if (args.empty()) {
      FindCairnDirs(fs, dir, 3, &dirs);
    } else {
      dirs.push_back(dir);
    }
    for (const std::string& d : dirs) {
      std::vector<std::string> names;
      if (!args.empty()) {
        names.push_back(args[0]);
      } else if (auto all = ListNames(fs, d); all.ok()) {
        names = std::move(all).value();
      } else {
        return Fail(all.status().ToString());
      }
      for (const std::string& name : names) {
        auto files = ListFiles(fs, d, name);
        if (!files.ok()) return Fail(files.status().ToString());
        for (const StoreFile& f : *files) {
          if (!f.temp) todo.emplace_back(d, f);
        }
      }
    }
  }

  Verifier verifier(fs);
  int damaged = 0, verified = 0;
  for (const auto& [d, f] : todo) {
    Status s = verifier.Check(d, f);
    if (s.code() == Code::kNotFound && todo.size() > 1 && !fs->Stat(f.path).ok()) {
      std::printf("%s: removed while verifying\n", f.path.c_str());
      continue;
    }
    ++verified;
    if (s.ok()) {
      std::printf("%s: ok\n", f.path.c_str());
    } else {
      ++damaged;
      std::printf("%s\n", Describe(f.path, s).c_str());
    }
  }
  std::printf("%d file%s verified, %d damaged\n", verified, verified == 1 ? "" : "s", damaged);
  if (verified == 0) {
    // A script must not read "nothing checked" as "all good".
    return Fail(args.empty() ? "no Cairn files in " + dir +
                                   " or below (expected DIR/<name>/v<version>.cairn)"
                             : "no committed files of '" + args[0] + "' in " + dir);
  }
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

// The layer fields of `info`: depth, stored bytes, content id, the base
// reference and the chain (or why it is broken).
void PrintLayers(os::FileSystem* fs, const std::string& dir, const format::FileReader& r) {
  const format::VersionRecord& rec = r.record();
  auto u = [](uint64_t v) { return static_cast<unsigned long long>(v); };
  std::printf("  \"depth\": %u,\n", rec.depth);
  std::printf("  \"stored_bytes\": %llu,\n", u(r.layout().stored_bytes));
  std::printf("  \"content_id\": \"0x%016llx\",\n", u(rec.content_id));
  if (!rec.layered()) {
    std::printf("  \"base\": null,\n");
    return;
  }
  std::printf("  \"base\": {\"version\": %lld, \"content_id\": \"0x%016llx\"},\n",
              static_cast<long long>(rec.base_version), u(rec.base_content_id));
  auto chain = format::Chain::Open(fs, dir, r.info().name, r.info().number, r.info().kind);
  if (!chain.ok()) {
    std::printf("  \"chain_error\": %s,\n", JsonString(chain.status().message()).c_str());
    return;
  }
  std::printf("  \"chain\": [");
  for (size_t i = 0; i < chain->links().size(); ++i) {
    std::printf("%s%lld", i == 0 ? "" : ", ", static_cast<long long>(chain->links()[i]->info().number));
  }
  std::printf("],\n  \"chain_stored_bytes\": %llu,\n", u(chain->stored_bytes()));
}

// The placement record's fields of `info` (docs/format.md 5): "affinity"
// (recorded thread CPU sets, null without a record) and, when a record was
// found but ignored, "placement_error".
void PrintAffinity(const Result<format::Placement>& p) {
  if (!p.ok() && p.status().code() != Code::kNotFound) {
    std::printf("  \"placement_error\": %s,\n", JsonString(p.status().message()).c_str());
  }
  if (!p.ok()) {
    std::printf("  \"affinity\": null,\n");
    return;
  }
  std::printf("  \"placement_nodes\": %u,\n  \"placement_cpus\": %u,\n", p->node_count, p->cpu_count);
  std::printf("  \"affinity\": [");
  for (size_t i = 0; i < p->threads.size(); ++i) {
    std::printf("%s{\"thread\": %d, \"cpus\": \"%s\"}", i == 0 ? "" : ", ", p->threads[i].index,
                os::FormatCpuList(p->threads[i].cpus).c_str());
  }
  std::printf("],\n");
}

// A region's "placement": its runs, or null when not recorded.
std::string PlacementJson(const Result<format::Placement>& p, int32_t id) {
  const format::RegionPlacement* r = p.ok() ? p->region(id) : nullptr;
  if (r == nullptr) return "null";
  std::string out = "[";
  for (size_t i = 0; i < r->runs.size(); ++i) {
    out += (i == 0 ? "" : ", ") + std::string("{\"node\": ") + std::to_string(r->runs[i].node) +
           ", \"bytes\": " + std::to_string(r->runs[i].bytes) + "}";
  }
  return out + "]";
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
  std::printf("  \"format_version\": %u,\n", r.format_version());
  PrintLayers(fs, dir, r);
  const auto placement =
      format::ReadPlacement(fs, format::PlacementPathOf(path), r.info().number, r.info().created_unix_ns);
  PrintAffinity(placement);
  std::printf("  \"regions\": [");
  for (size_t i = 0; i < l.regions.size(); ++i) {
    const format::Layout::Region& reg = l.regions[i];
    std::printf("%s\n    {\"id\": %d, \"memory\": \"%s\", \"bytes\": %llu, \"blocks\": %u, "
                "\"stored_bytes\": %llu, \"extents\": %u, \"placement\": %s}",
                i == 0 ? "" : ",", reg.spec.id, MemoryWord(reg.spec.memory),
                static_cast<unsigned long long>(reg.spec.bytes), reg.block_count,
                static_cast<unsigned long long>(reg.stored_bytes), reg.extent_count,
                PlacementJson(placement, reg.spec.id).c_str());
  }
  std::printf("%s]\n}\n", l.regions.empty() ? "" : "\n  ");
  return kExitOk;
}

// ---- compact ------------------------------------------------------------------

int Compact(os::FileSystem* fs, const std::string& dir, const std::string& name,
            const std::string& version_text) {
  if (Status s = format::ValidateName(name); !s.ok()) return Usage(s.message());
  int64_t version = 0;
  if (!ParseInt(version_text, &version)) return Usage("bad version '" + version_text + "'");
  const std::string path = format::EntryPath(dir, name, format::EntryKind::kCheckpoint, version);
  auto r = format::CompactVersion(fs, dir, name, version);
  if (!r.ok()) return Fail(Describe(path, r.status()));
  if (r->old_depth == 0) {
    std::printf("%s: already a full version\n", path.c_str());
  } else {
    std::printf("%s: compacted (depth %u -> 0, %llu -> %llu file bytes)\n", path.c_str(),
                r->old_depth, static_cast<unsigned long long>(r->old_file_bytes),
                static_cast<unsigned long long>(r->new_file_bytes));
  }
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
    // Bases that a kept version's chain needs are kept too (they are older,
    // so they are met after the versions that need them).
    int64_t good = 0;
    std::set<int64_t> needed;
    for (auto it = files->rbegin(); it != files->rend(); ++it) {
      if (it->temp || it->kind != format::EntryKind::kCheckpoint) continue;
      if (needed.count(it->number) != 0) {
        std::printf("kept %s (base of a kept version)\n", it->path.c_str());
      } else if (good >= keep) {
        const std::string why = "older than the newest " + std::to_string(keep) + " good version(s)";
        const std::string record = format::PlacementPathOf(it->path);  // its placement record first
        if (fs->Stat(record).ok()) remove(record, why);
        remove(it->path, why);
      } else if (auto chain = format::Chain::Open(fs, dir, name, it->number); chain.ok()) {
        // Good: its whole chain opens and checks out. A version whose chain
        // is broken is kept for inspection but does not count, or the last
        // restorable versions would go (the pipeline's Latest skips it too).
        ++good;
        for (const auto& link : chain->links()) needed.insert(link->info().number);
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
  if (cmd != "ls" && cmd != "verify" && cmd != "info" && cmd != "compact" && cmd != "gc") {
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
  if (cmd == "compact") {
    return rest.size() == 2 ? Compact(fs, dir, rest[0], rest[1]) : Usage("compact needs NAME VERSION");
  }
  return Gc(fs, dir, rest);
}

}  // namespace
}  // namespace cairn::cli

int main(int argc, char** argv) { return cairn::cli::Main(argc, argv); }
