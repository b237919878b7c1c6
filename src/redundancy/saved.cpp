// Reading a saved job's ranks (saved.hpp; docs/format.md 3.7 is normative).
#include "redundancy/saved.hpp"

#include <algorithm>
#include <functional>
#include <set>

#include "redundancy/collective.hpp"
#include "format/chain.hpp"
#include "format/naming.hpp"
#include "os/fs/fs.hpp"

namespace cairn::saved {

namespace {

os::FileSystem* Fs(const Config& root) {
  return root.fs != nullptr ? root.fs : os::FileSystem::Default();
}

// One directory that may serve a saved rank's versions (3.7, step 2).
struct Place {
  std::string dir;
  bool persistent = false;
};

std::vector<Place> Places(const Config& root, const Shape& shape, int rank) {
  const std::string r = "/rank" + std::to_string(rank);
  const std::string node =
      shape.ranks_per_node > 0 ? "/node" + std::to_string(rank / shape.ranks_per_node) : "";
  std::vector<Place> places{{root.scratch_dir + node + r, false}};
  if (!root.persistent_dir.empty()) places.push_back({root.persistent_dir + r, true});
  return places;
}

std::string Label(const std::string& name, int64_t version, int rank) {
  return "version " + std::to_string(version) + " of '" + name + "' of saved rank " +
         std::to_string(rank);
}

// The newest version the place's manifest records as globally committed
// there (3.7, step 3), or why none is.
Result<int64_t> CommittedAt(const Config& root, const Shape& shape, const Place& p,
                            const std::string& name) {
  auto m = collective::ReadManifest(Fs(root), p.dir, name);
  if (!m.ok()) return m.status();
  if (m->ranks != shape.ranks) {
    return Status::NotFound(p.dir + "/" + name + "/global was written by a job of " +
                            std::to_string(m->ranks) + " ranks, not the saved job's " +
                            std::to_string(shape.ranks));
  }
  return p.persistent ? m->persistent : m->committed;
}

Status CheckRank(const Shape& shape, int rank) {
  if (rank >= 0 && rank < shape.ranks) return Status::Ok();
  return Status::InvalidArgument(
      "saved rank " + std::to_string(rank) + " does not exist: the saved job had " +
      std::to_string(shape.ranks) + " ranks (0 .. " + std::to_string(shape.ranks - 1) + ")");
}

// Runs `use` on the chain of the first place that serves the version; a
// place whose chain is missing, broken or damaged (kCorrupt, kIo) falls
// through to the next. Other errors (the caller's) stop at once.
Status WithChain(const Config& root, const Shape& shape, const std::string& name, int64_t version,
                 int rank, const std::function<Status(const format::Chain&)>& use) {
  CAIRN_RETURN_IF_ERROR(format::ValidateName(name));
  CAIRN_RETURN_IF_ERROR(CheckRank(shape, rank));
  const std::string label = Label(name, version, rank);
  Status first;     // the first damage found
  std::string why;  // why each place did not serve it
  for (const Place& p : Places(root, shape, rank)) {
    auto committed = CommittedAt(root, shape, p, name);
    if (!committed.ok()) {
      why += "; " + p.dir + ": " +
             (committed.status().code() == Code::kNotFound ? "no readable manifest"
                                                           : committed.status().message());
      continue;
    }
    if (*committed < version) {
      why += "; " + p.dir + ": not globally committed there (its manifest records " +
             (p.persistent ? "persistent " : "committed ") + std::to_string(*committed) + ")";
      continue;
    }
    auto chain = format::Chain::Open(Fs(root), p.dir, name, version);
    Status s = chain.status();
    if (s.code() == Code::kNotFound &&
        !Fs(root)
             ->Stat(format::EntryPath(p.dir, name, format::EntryKind::kCheckpoint, version))
             .ok()) {
      why += "; " + p.dir + ": no file";
      continue;
    }
    if (s.code() == Code::kNotFound) s = Status::Corrupt("broken chain: " + s.message());
    if (s.ok()) s = use(*chain);
    if (s.ok() || (s.code() != Code::kCorrupt && s.code() != Code::kIo)) return s;
    if (first.ok()) first = s.WithContext(label + " is damaged");
  }
  if (!first.ok()) return first;
  return Status::NotFound(label + " cannot be read" + why);
}

}  // namespace

Result<Shape> FindShape(const Config& root, const std::string& name) {
  CAIRN_RETURN_IF_ERROR(format::ValidateName(name));
  std::vector<std::string> dirs{root.scratch_dir + "/node0/rank0", root.scratch_dir + "/rank0"};
  if (!root.persistent_dir.empty()) dirs.push_back(root.persistent_dir + "/rank0");
  // Of the manifests found, the newest job's (the largest committed): a
  // later job of another node shape leaves the older one's rank 0 behind.
  std::string tried;
  Result<collective::Manifest> best = Status::NotFound("none");
  std::string best_dir;
  for (const std::string& dir : dirs) {
    auto m = collective::ReadManifest(Fs(root), dir, name);
    if (m.ok() && (!best.ok() || m->committed > best->committed)) {
      best = m;
      best_dir = dir;
    }
    if (!m.ok()) {
      tried +=
          (tried.empty() ? "" : ", ") + dir + "/" + name + "/global (" +
          (m.status().code() == Code::kNotFound ? std::string("absent") : m.status().message()) +
          ")";
    }
  }
  if (!best.ok()) {
    return Status::NotFound("no saved MPI job of '" + name +
                            "': no global manifest of its rank 0 is readable: " + tried);
  }
  if (best->ranks < 1 || best->ranks > (1 << 30) || best->ranks_per_node < 0 ||
      best->ranks_per_node > (1 << 30)) {
    return Status::Corrupt(best_dir + "/" + name + "/global: ranks " + std::to_string(best->ranks) +
                           ", ranks_per_node " + std::to_string(best->ranks_per_node) +
                           " out of range");
  }
  return Shape{.ranks = static_cast<int>(best->ranks),
               .ranks_per_node = static_cast<int>(best->ranks_per_node)};
}

Result<uint64_t> RegionSize(const Config& root, const Shape& shape, const std::string& name,
                            int64_t version, int rank, int32_t region) {
  uint64_t size = 0;
  CAIRN_RETURN_IF_ERROR(
      WithChain(root, shape, name, version, rank, [&](const format::Chain& chain) {
        const int r = chain.tip().FindRegion(region);
        if (r < 0) {
          return Status::InvalidArgument(Label(name, version, rank) + " has no region id " +
                                         std::to_string(region));
        }
        size = chain.tip().layout().regions[r].spec.bytes;
        return Status::Ok();
      }));
  return size;
}

Status ReadRegion(const Config& root, const Shape& shape, const std::string& name, int64_t version,
                  int rank, int32_t region, uint64_t offset, void* dst, size_t bytes) {
  if (dst == nullptr && bytes > 0)
    return Status::InvalidArgument("reading a saved region: dst is NULL");
  return WithChain(root, shape, name, version, rank, [&](const format::Chain& chain) {
    const std::string label = Label(name, version, rank);
    const int r = chain.tip().FindRegion(region);
    if (r < 0)
      return Status::InvalidArgument(label + " has no region id " + std::to_string(region));
    const uint64_t size = chain.tip().layout().regions[r].spec.bytes;
    if (offset > size || bytes > size - offset) {
      return Status::InvalidArgument("bytes [" + std::to_string(offset) + ", " +
                                     std::to_string(offset) + " + " + std::to_string(bytes) +
                                     ") are outside region " + std::to_string(region) + " of " +
                                     label + ", which has " + std::to_string(size) + " bytes");
    }
    if (bytes == 0) return Status::Ok();
    const format::RegionTarget to{
        .id = region, .dst = dst, .host = true, .offset = offset, .bytes = bytes};
    return format::RestoreChain(Fs(root), chain, {&to, 1});
  });
}

Status Serves(const Config& root, const Shape& shape, const std::string& name, int64_t version,
              int rank) {
  return WithChain(root, shape, name, version, rank,
                   [](const format::Chain&) { return Status::Ok(); });
}

Result<std::vector<int64_t>> ServedVersions(const Config& root, const Shape& shape,
                                            const std::string& name, int rank) {
  CAIRN_RETURN_IF_ERROR(format::ValidateName(name));
  CAIRN_RETURN_IF_ERROR(CheckRank(shape, rank));
  std::set<int64_t> candidates;
  for (const Place& p : Places(root, shape, rank)) {
    auto committed = CommittedAt(root, shape, p, name);
    if (!committed.ok()) continue;
    auto entries = Fs(root)->List(p.dir + "/" + name);
    if (!entries.ok()) continue;
    for (const auto& e : *entries) {
      auto parsed = format::ParseEntryFileName(e.name);
      if (!e.is_dir && parsed && parsed->kind == format::EntryKind::kCheckpoint &&
          parsed->number <= *committed) {
        candidates.insert(parsed->number);
      }
    }
  }
  std::vector<int64_t> served;
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    if (Serves(root, shape, name, *it, rank).ok()) served.push_back(*it);
  }
  return served;
}

}  // namespace cairn::saved
