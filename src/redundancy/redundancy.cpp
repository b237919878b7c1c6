// Shared by the redundancy levels (redundancy.hpp; docs/format.md 3.8, 3.9).
#include "redundancy/redundancy.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>

#include "redundancy/bundle_stream.hpp"
#include "redundancy/collective.hpp"
#include "format/chain.hpp"
#include "format/naming.hpp"
#include "os/fs/fs.hpp"

namespace cairn::redundancy {

os::FileSystem* Fs(const Config& c) { return c.fs != nullptr ? c.fs : os::FileSystem::Default(); }

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

Status WriteFile(const Config& c, const std::string& dir, const std::string& file,
                 const uint8_t* data, size_t bytes) {
  CAIRN_ASSIGN_OR_RETURN(auto out, PendingFile::Create(c, dir, file));
  CAIRN_RETURN_IF_ERROR(out->WriteAt(data, bytes, 0));
  return out->Commit();
}

Result<std::vector<uint8_t>> Bundle(const Config& c, const std::string& dir,
                                    const std::string& name, int64_t version) {
  // Sized first and read in place: a rank's whole version passes through
  // memory once (it is the largest thing the levels move).
  CAIRN_ASSIGN_OR_RETURN(auto reader, BundleReader::Open(c, dir, name, version));
  std::vector<uint8_t> out(reader->size());
  CAIRN_RETURN_IF_ERROR(reader->Read(0, out.data(), out.size()));
  return out;
}

std::vector<int64_t> Versions(const Config& c, const std::string& dir, const std::string& name) {
  std::vector<int64_t> numbers;
  auto entries = Fs(c)->List(dir + "/" + name);
  if (!entries.ok()) return numbers;
  for (const auto& e : *entries) {
    auto parsed = format::ParseEntryFileName(e.name);
    if (!e.is_dir && parsed && parsed->kind == format::EntryKind::kCheckpoint)
      numbers.push_back(parsed->number);
  }
  std::sort(numbers.rbegin(), numbers.rend());
  return numbers;
}

std::vector<int64_t> Intact(const Config& c, const std::string& dir, const std::string& name) {
  std::vector<int64_t> intact = Versions(c, dir, name);
  std::erase_if(intact, [&](int64_t v) { return !format::Chain::Open(Fs(c), dir, name, v).ok(); });
  return intact;
}

void Retain(const Config& c, const std::string& dir, const std::string& name, bool chains) {
  const std::vector<int64_t> numbers = Versions(c, dir, name);
  const size_t keep = c.keep_versions > 0 ? static_cast<size_t>(c.keep_versions) : numbers.size();
  auto path = [&](int64_t v) {
    return format::EntryPath(dir, name, format::EntryKind::kCheckpoint, v);
  };
  std::set<int64_t> needed;
  for (size_t i = 0; i < std::min(keep, numbers.size()); ++i) {
    for (int64_t v = numbers[i]; v >= 0 && needed.insert(v).second;) {
      if (!chains) break;
      auto r = format::FileReader::Open(Fs(c), path(v));
      if (!r.ok()) break;
      v = (*r)->record().base_version;
    }
  }
  for (size_t i = keep; i < numbers.size(); ++i) {
    if (!needed.contains(numbers[i])) (void)Fs(c)->Remove(path(numbers[i]));
  }
}

Result<std::vector<int>> NodesOf(Group& group) {
  std::vector<int64_t> nodes(static_cast<size_t>(group.size()), -1);
  nodes[static_cast<size_t>(group.rank())] = group.node();
  CAIRN_RETURN_IF_ERROR(group.AllReduce(Group::Op::kMax, nodes.data(), nodes.size()));
  return std::vector<int>(nodes.begin(), nodes.end());
}

Result<Recovered> Recover(Group& group, const Config& config, const std::vector<Level*>& levels,
                          const std::string& name, const std::vector<int64_t>& intact,
                          int64_t bound, int64_t distrust) {
  // 1. What each level could bring back, with what the member has itself.
  std::vector<int64_t> avail = intact;
  for (Level* level : levels) {
    CAIRN_ASSIGN_OR_RETURN(std::vector<int64_t> offers, level->Offers(name, bound, distrust));
    avail.insert(avail.end(), offers.begin(), offers.end());
  }
  std::sort(avail.rbegin(), avail.rend());
  avail.erase(std::unique(avail.begin(), avail.end()), avail.end());
  // 2. The newest version every member has, one way or another.
  Recovered out;
  CAIRN_ASSIGN_OR_RETURN(out.version, collective::NewestCommon(group, avail, bound));
  // 3. Members that lack it locally (or distrust their copy) fetch it from
  // the first level that serves them; every level takes part either way.
  const int64_t v = out.version;
  bool need = v >= 0 && (v == distrust || !format::Chain::Open(Fs(config), config.scratch_dir, name, v).ok());
  for (size_t i = 0; i < levels.size(); ++i) {
    if (v < 0) break;
    CAIRN_ASSIGN_OR_RETURN(std::string served, levels[i]->Fetch(name, v, need));
    if (!served.empty()) {
      out.level = static_cast<int>(i);
      out.served = std::move(served);
      need = false;
    }
  }
  // 4. Each level brings back its own redundancy of v that a lost node took.
  for (Level* level : levels) {
    if (v >= 0) CAIRN_RETURN_IF_ERROR(level->Refill(name, v));
  }
  for (Level* level : levels) {
    for (std::string& note : level->Notes()) out.notes.push_back(std::move(note));
  }
  return out;
}

}  // namespace cairn::redundancy
