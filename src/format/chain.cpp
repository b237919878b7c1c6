// Chain::Open and Chain::VerifyAll: follow and check base references
// (docs/format.md 4.6 items 8-11).
#include "format/chain.hpp"

#include <cstdio>

#include "format/naming.hpp"

namespace cairn::format {
namespace {

std::string Hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// "v7" or "h7": how a link names a version in messages.
std::string Short(EntryKind kind, int64_t number) {
  std::string s(1, kind == EntryKind::kCheckpoint ? 'v' : 'h');
  s += std::to_string(number);
  return s;
}

// The region sets of a layer and its base are equal (4.1): same ids, sizes
// and memory kinds, in any order. Empty when they are, else the difference.
std::string CompareRegions(const Layout& layer, const FileReader& base) {
  if (layer.regions.size() != base.layout().regions.size()) {
    return std::to_string(layer.regions.size()) + " regions here, " +
           std::to_string(base.layout().regions.size()) + " in the base";
  }
  for (const Layout::Region& reg : layer.regions) {
    const std::string id = "region id " + std::to_string(reg.spec.id);
    const int b = base.FindRegion(reg.spec.id);
    if (b < 0) return id + " is missing in the base";
    const RegionSpec& other = base.layout().regions[b].spec;
    if (other.bytes != reg.spec.bytes) {
      return id + " is " + std::to_string(reg.spec.bytes) + " bytes here, " +
             std::to_string(other.bytes) + " in the base";
    }
    if (other.memory != reg.spec.memory) return id + " has another memory kind in the base";
  }
  return "";
}

// Checks the reference from `layer` to `base` (already opened).
Status CheckLink(const FileReader& layer, const FileReader& base, const std::string& link) {
  const VersionRecord& want = layer.record();
  auto corrupt = [&](const std::string& what) {
    return Status::Corrupt(layer.path() + ": " + link + ": " + what);
  };
  if (base.format_version() != kFormatVersion2) {
    return corrupt("the base is a format version " + std::to_string(base.format_version()) +
                   " file, which has no content id");
  }
  if (base.record().content_id != want.base_content_id) {
    return corrupt("content id " + Hex64(want.base_content_id) + " expected, the file has " +
                   Hex64(base.record().content_id) + " (a different version " +
                   std::to_string(want.base_version) + ")");
  }
  if (base.info().kind != layer.info().kind || base.info().name != layer.info().name) {
    return corrupt("the base is a different entry ('" + base.info().name + "')");
  }
  // Strictly decreasing, not "exactly one less": compacting a link to depth
  // 0 leaves the layers above it valid (docs/format.md 4.6 item 10).
  if (base.record().depth >= want.depth) {
    return corrupt("depth " + std::to_string(want.depth) + " here is not above the base's " +
                   std::to_string(base.record().depth));
  }
  if (std::string diff = CompareRegions(layer.layout(), base); !diff.empty()) return corrupt(diff);
  return Status::Ok();
}

}  // namespace

Result<Chain> Chain::Open(os::FileSystem* fs, const std::string& dir, const std::string& name,
                          int64_t number, EntryKind kind) {
  Chain chain;
  CAIRN_ASSIGN_OR_RETURN(auto tip, FileReader::Open(fs, EntryPath(dir, name, kind, number)));
  chain.links_.push_back(std::move(tip));
  // Base numbers strictly decrease (the reader checks base_version < number),
  // so the walk ends.
  while (chain.links_.back()->record().layered()) {
    const FileReader& layer = *chain.links_.back();
    const int64_t base_number = layer.record().base_version;
    const std::string link =
        Short(kind, layer.info().number) + " -> base " + Short(kind, base_number);
    const std::string base_path = EntryPath(dir, name, kind, base_number);
    auto base = FileReader::Open(fs, base_path);
    if (!base.ok()) {
      if (base.status().code() == Code::kNotFound) {
        return Status::NotFound(layer.path() + ": " + link + ": missing (" + base_path + ")");
      }
      return Status(base.status().code(), layer.path() + ": " + link + ": " +
                                              base.status().message());
    }
    CAIRN_RETURN_IF_ERROR(CheckLink(layer, **base, link));
    chain.links_.push_back(std::move(base).value());
  }
  return chain;
}

uint64_t Chain::stored_bytes() const {
  uint64_t n = 0;
  for (const auto& l : links_) n += l->layout().stored_bytes;
  return n;
}

Status Chain::VerifyAll() {
  for (size_t i = 0; i < links_.size(); ++i) {
    Status s = links_[i]->VerifyAll();
    if (s.ok()) continue;
    if (i == 0) return s;
    const EntryKind kind = tip().info().kind;
    return s.WithContext(tip().path() + ": " + Short(kind, links_[i - 1]->info().number) +
                         " -> base " + Short(kind, links_[i]->info().number));
  }
  return Status::Ok();
}

}  // namespace cairn::format
