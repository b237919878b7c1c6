// L2 partner copies (partner.hpp; docs/format.md 3.8 is normative).
#include "api/partner.hpp"

#include <unistd.h>  // getpid: temp file names (docs/format.md, 3.3)

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "api/collective.hpp"
#include "format/chain.hpp"
#include "format/naming.hpp"
#include "os/fs.hpp"

namespace cairn::partner {

namespace {

os::FileSystem* Fs(const Config& c) { return c.fs != nullptr ? c.fs : os::FileSystem::Default(); }

// <rank dir>/.partner/rank<s>: where a holder keeps source s's copies (under
// <name>/, as in a tier; a name never starts with a dot).
std::string CopyDir(const Config& c, int source) {
  return c.scratch_dir + "/.partner/rank" + std::to_string(source);
}

// Messages are flat byte strings of int64 values and file contents (the
// ranks of one job run the same binary on machines of one byte order).
void Put(std::vector<uint8_t>* out, int64_t v) {
  const size_t at = out->size();
  out->resize(at + sizeof v);
  std::memcpy(out->data() + at, &v, sizeof v);
}
bool Get(const std::vector<uint8_t>& in, size_t* at, int64_t* v) {
  if (in.size() - *at < sizeof *v) return false;
  std::memcpy(v, in.data() + *at, sizeof *v);
  *at += sizeof *v;
  return true;
}

Result<std::vector<uint8_t>> ReadWhole(os::FileSystem* fs, const std::string& path) {
  CAIRN_ASSIGN_OR_RETURN(auto file, fs->Open(path, os::OpenOptions{}));
  CAIRN_ASSIGN_OR_RETURN(uint64_t size, file->Size());
  std::vector<uint8_t> bytes(size);
  CAIRN_RETURN_IF_ERROR(file->ReadAt(bytes.data(), bytes.size(), 0));
  return bytes;
}

// temp + fsync + rename + directory fsync (docs/format.md, 3.3).
Status WriteFile(const Config& c, const std::string& dir, const std::string& file,
                 const uint8_t* data, size_t bytes) {
  os::FileSystem* fs = Fs(c);
  CAIRN_RETURN_IF_ERROR(fs->CreateDirs(dir, 0700));
  const std::string tmp = dir + "/." + file + "." + std::to_string(::getpid()) + ".tmp";
  Status s = [&]() -> Status {
    CAIRN_ASSIGN_OR_RETURN(auto f,
                           fs->Open(tmp, os::OpenOptions{.write = true, .mode = c.file_mode}));
    CAIRN_RETURN_IF_ERROR(f->WriteAt(data, bytes, 0));
    if (c.fsync) CAIRN_RETURN_IF_ERROR(f->Sync());
    CAIRN_RETURN_IF_ERROR(f->Close());
    CAIRN_RETURN_IF_ERROR(fs->Rename(tmp, dir + "/" + file));
    return c.fsync ? fs->SyncDir(dir) : Status::Ok();
  }();
  if (!s.ok()) (void)fs->Remove(tmp);
  return s.WithContext("writing " + dir + "/" + file);
}

// A bundle: the files of one version's chain, [count] then per file
// [number][bytes][contents].
Result<std::vector<uint8_t>> Bundle(const Config& c, const std::string& dir,
                                    const std::string& name, int64_t version) {
  CAIRN_ASSIGN_OR_RETURN(format::Chain chain, format::Chain::Open(Fs(c), dir, name, version));
  std::vector<uint8_t> out;
  Put(&out, static_cast<int64_t>(chain.links().size()));
  for (const auto& link : chain.links()) {
    const std::string& path = link->path();
    auto parsed = format::ParseEntryFileName(path.substr(path.rfind('/') + 1));
    if (!parsed) return Status::Internal(path + ": not a version file name");
    CAIRN_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadWhole(Fs(c), path));
    Put(&out, parsed->number);
    Put(&out, static_cast<int64_t>(bytes.size()));
    out.insert(out.end(), bytes.begin(), bytes.end());
  }
  return out;
}

Status Unbundle(const Config& c, const std::string& dir, const std::vector<uint8_t>& in,
                const std::string& from) {
  size_t at = 0;
  int64_t count = 0;
  if (!Get(in, &at, &count) || count < 1)
    return Status::Corrupt("a partner message from " + from + " holds no file");
  for (int64_t i = 0; i < count; ++i) {
    int64_t number = 0, bytes = 0;
    if (!Get(in, &at, &number) || !Get(in, &at, &bytes) || bytes < 0 ||
        static_cast<uint64_t>(bytes) > in.size() - at) {
      return Status::Corrupt("a partner message from " + from + " is truncated");
    }
    const std::string file = format::EntryFileName(format::EntryKind::kCheckpoint, number);
    CAIRN_RETURN_IF_ERROR(WriteFile(c, dir, file, in.data() + at, static_cast<size_t>(bytes)));
    at += static_cast<size_t>(bytes);
  }
  return Status::Ok();
}

// The versions a holder keeps of one source, newest first, whose chain
// opens (structure checked, no data read).
std::vector<int64_t> Held(const Config& c, const std::string& name, int source) {
  std::vector<int64_t> held;
  const std::string dir = CopyDir(c, source);
  auto entries = Fs(c)->List(dir + "/" + name);
  if (!entries.ok()) return held;
  for (const auto& e : *entries) {
    auto parsed = format::ParseEntryFileName(e.name);
    if (!e.is_dir && parsed && parsed->kind == format::EntryKind::kCheckpoint &&
        format::Chain::Open(Fs(c), dir, name, parsed->number).ok()) {
      held.push_back(parsed->number);
    }
  }
  std::sort(held.rbegin(), held.rend());
  return held;
}

// Keeps the newest keep_versions copies of a source and every version their
// chains read (a layered copy is useless without its bases); older ones are
// deleted.
void Retain(const Config& c, const std::string& name, int source) {
  const std::string dir = CopyDir(c, source) + "/" + name;
  auto entries = Fs(c)->List(dir);
  if (!entries.ok()) return;
  std::vector<int64_t> numbers;
  for (const auto& e : *entries) {
    auto parsed = format::ParseEntryFileName(e.name);
    if (!e.is_dir && parsed && parsed->kind == format::EntryKind::kCheckpoint)
      numbers.push_back(parsed->number);
  }
  std::sort(numbers.rbegin(), numbers.rend());
  const size_t keep = c.keep_versions > 0 ? static_cast<size_t>(c.keep_versions) : numbers.size();
  auto path = [&](int64_t v) { return format::EntryPath(CopyDir(c, source), name, format::EntryKind::kCheckpoint, v); };
  std::set<int64_t> needed;
  for (size_t i = 0; i < std::min(keep, numbers.size()); ++i) {
    for (int64_t v = numbers[i]; v >= 0 && needed.insert(v).second;) {
      auto r = format::FileReader::Open(Fs(c), path(v));
      if (!r.ok()) break;
      v = (*r)->record().base_version;
    }
  }
  for (size_t i = keep; i < numbers.size(); ++i) {
    if (!needed.contains(numbers[i])) (void)Fs(c)->Remove(path(numbers[i]));
  }
}

}  // namespace

Map MapFromNodes(const std::vector<int>& node_of, int rank) {
  std::map<int, std::vector<int>> members;  // node -> its ranks, in rank order
  for (int r = 0; r < static_cast<int>(node_of.size()); ++r) members[node_of[r]].push_back(r);
  std::vector<int> nodes;
  for (const auto& [n, ranks] : members) nodes.push_back(n);
  auto partner_of = [&](int r) {
    const auto at = std::lower_bound(nodes.begin(), nodes.end(), node_of[r]) - nodes.begin();
    const std::vector<int>& here = members[node_of[r]];
    const std::vector<int>& next = members[nodes[(at + 1) % nodes.size()]];
    const auto i = std::find(here.begin(), here.end(), r) - here.begin();
    return next[static_cast<size_t>(i) % next.size()];
  };
  Map map;
  if (nodes.size() < 2) return map;
  map.partner = partner_of(rank);
  for (int s = 0; s < static_cast<int>(node_of.size()); ++s) {
    if (partner_of(s) == rank) map.sources.push_back(s);
  }
  return map;
}

Result<Map> MakeMap(Group& group) {
  std::vector<int64_t> nodes(static_cast<size_t>(group.size()), -1);
  nodes[static_cast<size_t>(group.rank())] = group.node();
  CAIRN_RETURN_IF_ERROR(group.AllReduce(Group::Op::kMax, nodes.data(), nodes.size()));
  std::vector<int> node_of(nodes.begin(), nodes.end());
  Map map = MapFromNodes(node_of, group.rank());
  if (map.partner < 0) {
    return Status::Config("CAIRN_L2_EVERY: partner copies need ranks on at least two nodes; all " +
                          std::to_string(group.size()) +
                          " ranks are on one (CAIRN_MPI_RANKS_PER_NODE simulates nodes)");
  }
  return map;
}

Result<int64_t> EveryFromEnvironment() {
  const char* env = std::getenv("CAIRN_L2_EVERY");
  if (env == nullptr || *env == '\0') return int64_t{0};
  char* end = nullptr;
  const long long v = std::strtoll(env, &end, 10);
  if (*end != '\0' || v < 0) {
    return Status::Config(
        std::string("CAIRN_L2_EVERY is '") + env +
        "'; it must be a whole number >= 0 (every how many committed checkpoints; 0 = off)");
  }
  return static_cast<int64_t>(v);
}

Status Replicate(Group& group, const Map& map, const Config& config, const std::string& name,
                 int64_t version) {
  auto mine = Bundle(config, config.scratch_dir, name, version);
  std::vector<Group::Outgoing> sends;
  if (mine.ok()) sends.push_back({.to = map.partner, .data = mine->data(), .bytes = mine->size()});
  // A rank whose own file cannot be read still takes part (its partner
  // expects a message): it sends an empty one, which stores nothing.
  static const uint8_t kNothing = 0;
  if (!mine.ok()) sends.push_back({.to = map.partner, .data = &kNothing, .bytes = 0});
  std::vector<std::vector<uint8_t>> got;
  CAIRN_RETURN_IF_ERROR(group.Exchange(sends, map.sources, &got));
  Status s = mine.status().WithContext("the partner copy of version " + std::to_string(version));
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].empty()) continue;
    const int source = map.sources[i];
    Status stored = Unbundle(config, CopyDir(config, source) + "/" + name, got[i],
                             "rank " + std::to_string(source));
    if (stored.ok()) Retain(config, name, source);
    if (s.ok()) s = stored;
  }
  return s;
}

Result<int64_t> Recover(Group& group, const Map& map, const Config& config, const std::string& name,
                        const std::vector<int64_t>& intact, int64_t bound, int64_t distrust,
                        std::string* served) {
  served->clear();
  // 1. Each holder tells each source which of its versions it keeps.
  std::vector<std::vector<uint8_t>> lists(map.sources.size());
  std::vector<Group::Outgoing> sends;
  for (size_t i = 0; i < map.sources.size(); ++i) {
    for (int64_t v : Held(config, name, map.sources[i])) Put(&lists[i], v);
    sends.push_back({.to = map.sources[i], .data = lists[i].data(), .bytes = lists[i].size()});
  }
  std::vector<std::vector<uint8_t>> got;
  CAIRN_RETURN_IF_ERROR(group.Exchange(sends, {map.partner}, &got));
  std::vector<int64_t> held;
  size_t at = 0;
  for (int64_t v = 0; Get(got[0], &at, &v);) held.push_back(v);
  // 2. The newest version every member has, itself or at its partner.
  std::vector<int64_t> avail = intact;
  avail.insert(avail.end(), held.begin(), held.end());
  std::sort(avail.rbegin(), avail.rend());
  avail.erase(std::unique(avail.begin(), avail.end()), avail.end());
  CAIRN_ASSIGN_OR_RETURN(int64_t v, collective::NewestCommon(group, avail, bound));
  // 3. Members that lack it locally (or distrust their copy) ask for it.
  const bool have =
      v >= 0 && v != distrust && format::Chain::Open(Fs(config), config.scratch_dir, name, v).ok();
  const bool ask = v >= 0 && !have && std::find(held.begin(), held.end(), v) != held.end();
  std::vector<uint8_t> request;
  Put(&request, ask ? v : -1);
  CAIRN_RETURN_IF_ERROR(group.Exchange(
      {{.to = map.partner, .data = request.data(), .bytes = request.size()}}, map.sources, &got));
  // 4. Holders send the asked copies; askers commit them locally.
  std::vector<std::vector<uint8_t>> bundles(map.sources.size());
  std::vector<int> askers;
  sends.clear();
  for (size_t i = 0; i < map.sources.size(); ++i) {
    int64_t asked = -1;
    at = 0;
    if (!Get(got[i], &at, &asked) || asked < 0) continue;
    auto bundle = Bundle(config, CopyDir(config, map.sources[i]), name, asked);
    // An unreadable copy is sent as an empty message: the asker then finds
    // no file and the collective restore falls back as for any damage.
    if (bundle.ok()) bundles[i] = std::move(*bundle);
    sends.push_back({.to = map.sources[i], .data = bundles[i].data(), .bytes = bundles[i].size()});
  }
  CAIRN_RETURN_IF_ERROR(
      group.Exchange(sends, ask ? std::vector<int>{map.partner} : std::vector<int>{}, &got));
  if (ask && !got[0].empty()) {
    CAIRN_RETURN_IF_ERROR(Unbundle(config, config.scratch_dir + "/" + name, got[0],
                                   "rank " + std::to_string(map.partner)));
    *served = "version " + std::to_string(v) + " of '" + name + "' from its partner copy on rank " +
              std::to_string(map.partner) + " (L2)";
  }
  return v;
}

}  // namespace cairn::partner
