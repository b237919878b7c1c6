// Collective agreement over a Group (collective.hpp, docs/mpi.md).
#include "api/collective.hpp"

#include <algorithm>
#include <array>
#include <limits>

#include <unistd.h>  // getpid: the temp file's name (docs/format.md, 3.3)

#include "format/naming.hpp"
#include "os/fs.hpp"

namespace cairn {
Group::~Group() = default;
}  // namespace cairn

namespace cairn::collective {

namespace {

constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
// A failure is reduced as rank * kCodes + |code|: the minimum names the
// lowest failed rank and its code in one MPI_Allreduce.
constexpr int64_t kCodes = 64;

// The keys that must be the same on every rank, each with its value as text.
// A rank's own directories are derived from storage.scratch/persistent, so
// those are compared before the rank's subdirectory is added.
struct AgreedKey {
  const char* key;
  std::string value;
};
std::vector<AgreedKey> AgreedKeys(const Config& c) {
  return {
      {"storage.scratch (CAIRN_SCRATCH)", c.scratch_dir},
      {"storage.persistent (CAIRN_PERSISTENT)", c.persistent_dir},
      {"storage.fsync (CAIRN_FSYNC)", c.fsync ? "true" : "false"},
      {"host_cache.block_size (CAIRN_BLOCK_SIZE)", std::to_string(c.block_bytes)},
      {"retention.keep_versions (CAIRN_KEEP)", std::to_string(c.keep_versions)},
  };
}

}  // namespace

// FNV-1a.
int64_t Digest(std::string_view text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return static_cast<int64_t>(h >> 1);  // non-negative
}

Status Agree(Group& group, const Status& local, std::string_view what) {
  int64_t v = local.ok() ? kNone : group.rank() * kCodes + (-static_cast<int64_t>(local.code()) % kCodes);
  Status s = group.AllReduce(Group::Op::kMin, &v, 1);
  if (!s.ok()) return s.WithContext(std::string(what) + ": agreeing on the outcome across ranks");
  if (v == kNone) return Status::Ok();
  if (!local.ok()) return local.WithContext(std::string(what) + " (rank " + std::to_string(group.rank()) + ")");
  const int64_t rank = v / kCodes;
  const auto code = static_cast<Code>(-(v % kCodes));
  return Status(code, std::string(what) + " failed on rank " + std::to_string(rank) + " (" +
                          CodeName(code) + "; that rank's error says why), so it fails on every rank");
}

Status CheckConfigsAgree(Group& group, const Config& config) {
  const std::vector<AgreedKey> keys = AgreedKeys(config);
  std::vector<int64_t> lo(keys.size()), hi(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) lo[i] = hi[i] = Digest(keys[i].value);
  CAIRN_RETURN_IF_ERROR(group.AllReduce(Group::Op::kMin, lo.data(), lo.size()));
  CAIRN_RETURN_IF_ERROR(group.AllReduce(Group::Op::kMax, hi.data(), hi.size()));
  std::string differ;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (lo[i] == hi[i]) continue;
    differ += differ.empty() ? "" : ", ";
    differ += std::string(keys[i].key) + " (here '" + keys[i].value + "')";
  }
  if (differ.empty()) return Status::Ok();
  return Status::Config("the configuration differs across the " + std::to_string(group.size()) +
                        " ranks (rank " + std::to_string(group.rank()) + "): " + differ +
                        "; every rank must use the same value (docs/mpi.md)");
}

Config RankConfig(const Config& config, const Group& group) {
  Config c = config;
  const std::string rank = "/rank" + std::to_string(group.rank());
  const std::string node = group.simulated_nodes() ? "/node" + std::to_string(group.node()) : "";
  c.scratch_dir = config.scratch_dir + node + rank;
  if (!config.persistent_dir.empty()) c.persistent_dir = config.persistent_dir + rank;
  return c;
}

Result<int64_t> NewestCommon(Group& group, const std::vector<int64_t>& descending, int64_t bound) {
  // Each round: the least of the members' newest candidates <= bound is an
  // upper bound of every common one; if every member has it, it is the
  // answer, else the search continues below it. Each round drops at least
  // one candidate of some member: at most (keep_versions x tiers) rounds.
  while (bound >= 0) {
    auto it = std::find_if(descending.begin(), descending.end(), [&](int64_t v) { return v <= bound; });
    int64_t c = it == descending.end() ? -1 : *it;
    CAIRN_RETURN_IF_ERROR(group.AllReduce(Group::Op::kMin, &c, 1));
    if (c < 0) return int64_t{-1};
    int64_t everyone = std::find(descending.begin(), descending.end(), c) != descending.end() ? 1 : 0;
    CAIRN_RETURN_IF_ERROR(group.AllReduce(Group::Op::kMin, &everyone, 1));
    if (everyone == 1) return c;
    bound = c - 1;
  }
  return int64_t{-1};
}

Result<Manifest> ParseManifest(std::string_view text, std::string_view path) {
  auto bad = [&](const std::string& why) {
    return Status::Corrupt(std::string(path) + ": not a Cairn global manifest: " + why);
  };
  constexpr std::string_view kMagic = "cairn-global 1\n";
  if (text.substr(0, kMagic.size()) != kMagic) return bad("the first line is not 'cairn-global 1'");
  text.remove_prefix(kMagic.size());
  Manifest m;
  std::array<std::pair<std::string_view, int64_t*>, 4> keys{
      {{"ranks", &m.ranks},
       {"committed", &m.committed},
       {"persistent", &m.persistent},
       {"ranks_per_node", &m.ranks_per_node}}};
  for (auto& [key, out] : keys) {
    if (key == "ranks_per_node" && text.empty()) break;  // written before it existed: 0
    const size_t eol = text.find('\n');
    if (eol == std::string_view::npos) return bad("no line '" + std::string(key) + " <n>'");
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol + 1);
    if (line.substr(0, key.size() + 1) != std::string(key) + " ") {
      return bad("expected '" + std::string(key) + " <n>', found '" + std::string(line) + "'");
    }
    // Built by appending: GCC 12 warns falsely (-Wrestrict, its PR 105329)
    // on "'" + std::string(...) here.
    std::string not_number(1, '\'');
    not_number.append(line).append("' is not a number");
    try {
      size_t used = 0;
      const std::string number(line.substr(key.size() + 1));
      *out = std::stoll(number, &used);
      if (used != number.size()) return bad(not_number);
    } catch (const std::exception&) {
      return bad(not_number);
    }
  }
  return m;
}

namespace {

Result<std::string> ReadSmallFile(os::FileSystem* fs, const std::string& path) {
  CAIRN_ASSIGN_OR_RETURN(auto file, fs->Open(path, os::OpenOptions{}));
  CAIRN_ASSIGN_OR_RETURN(uint64_t size, file->Size());
  if (size > 4096) return Status::Corrupt(path + ": " + std::to_string(size) + " bytes, too big for a manifest");
  std::string text(size, '\0');
  CAIRN_RETURN_IF_ERROR(file->ReadAt(text.data(), text.size(), 0));
  return text;
}

}  // namespace

Result<Manifest> ReadManifest(os::FileSystem* fs, const std::string& dir, const std::string& name) {
  if (fs == nullptr) fs = os::FileSystem::Default();
  const std::string path = dir + "/" + name + "/global";
  CAIRN_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(fs, path));
  return ParseManifest(text, path);
}

Status RecordGlobal(os::FileSystem* fs, const Config& config, const std::string& root,
                    const std::string& name, const Manifest& shape, int64_t committed,
                    int64_t persistent) {
  if (fs == nullptr) fs = os::FileSystem::Default();
  const std::string dir = root + "/" + name;
  const std::string path = dir + "/global";
  Manifest m = shape;
  m.committed = m.persistent = -1;
  // A damaged manifest is replaced: it only ever records what the ranks
  // agree on again at their next collective call. One of another job shape
  // is replaced too: this job's commits are the directory's newest.
  if (auto old = ReadManifest(fs, root, name);
      old.ok() && old->ranks == shape.ranks && old->ranks_per_node == shape.ranks_per_node) {
    if (committed <= old->committed && persistent <= old->persistent) return Status::Ok();
    m = *old;
  }
  m.committed = std::max(m.committed, committed);
  m.persistent = std::max(m.persistent, persistent);
  const std::string text = "cairn-global 1\nranks " + std::to_string(m.ranks) + "\ncommitted " +
                           std::to_string(m.committed) + "\npersistent " +
                           std::to_string(m.persistent) + "\nranks_per_node " +
                           std::to_string(m.ranks_per_node) + "\n";
  CAIRN_RETURN_IF_ERROR(fs->CreateDirs(dir, 0700));
  const std::string tmp = dir + "/.global." + std::to_string(::getpid()) + ".tmp";
  Status s = [&]() -> Status {
    CAIRN_ASSIGN_OR_RETURN(auto file, fs->Open(tmp, os::OpenOptions{.write = true, .mode = config.file_mode}));
    CAIRN_RETURN_IF_ERROR(file->WriteAt(text.data(), text.size(), 0));
    if (config.fsync) CAIRN_RETURN_IF_ERROR(file->Sync());
    CAIRN_RETURN_IF_ERROR(file->Close());
    CAIRN_RETURN_IF_ERROR(fs->Rename(tmp, path));
    return config.fsync ? fs->SyncDir(dir) : Status::Ok();
  }();
  if (!s.ok()) {
    (void)fs->Remove(tmp);
    return s.WithContext("recording the global commit of '" + name + "' in " + path);
  }
  return Status::Ok();
}

}  // namespace cairn::collective
