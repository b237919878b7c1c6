#include "engine/placement.hpp"

#include <unistd.h>

#include <algorithm>
#include <string>

namespace cairn::core {

namespace {

constexpr size_t kQueryBatch = 4096;  // pages per move_pages call

size_t PageBytes() {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

// [addr, addr + bytes) shrunk to whole pages; false when no page is left.
bool InnerPages(uintptr_t addr, size_t bytes, uintptr_t* begin, size_t* len) {
  const uintptr_t page = PageBytes();
  const uintptr_t b = (addr + page - 1) & ~(page - 1);
  const uintptr_t e = (addr + bytes) & ~(page - 1);
  if (e <= b) return false;
  *begin = b;
  *len = e - b;
  return true;
}

}  // namespace

Result<PlacementMode> ParsePlacementMode(std::string_view text) {
  if (text == "restore") return PlacementMode::kRestore;
  if (text == "keep") return PlacementMode::kKeep;
  if (text == "interleave") return PlacementMode::kInterleave;
  return Status::Config("restart.placement (CAIRN_PLACEMENT) is '" + std::string(text) +
                        "'; it must be restore, keep or interleave");
}

Result<format::RegionPlacement> RecordRegion(os::Numa& numa, int32_t id, const void* data, size_t bytes,
                                             uint32_t granule) {
  format::RegionPlacement r{.id = id, .bytes = bytes};
  if (bytes == 0) return r;
  const uintptr_t base = reinterpret_cast<uintptr_t>(data);
  const size_t samples = (bytes + granule - 1) / granule;
  std::vector<void*> pages;
  std::vector<int> nodes;
  for (size_t first = 0; first < samples; first += kQueryBatch) {
    const size_t n = std::min(kQueryBatch, samples - first);
    pages.resize(n);
    nodes.assign(n, -1);
    for (size_t i = 0; i < n; ++i) {
      pages[i] = reinterpret_cast<void*>((base + (first + i) * granule) & ~(PageBytes() - 1));
    }
    CAIRN_RETURN_IF_ERROR(numa.QueryNodes(pages, nodes));
    for (size_t i = 0; i < n; ++i) {
      const uint64_t offset = (first + i) * static_cast<uint64_t>(granule);
      format::AppendRun(&r.runs, nodes[i], std::min<uint64_t>(granule, bytes - offset));
    }
  }
  return r;
}

int NodeAt(const format::RegionPlacement& r, uint64_t offset) {
  uint64_t end = 0;
  for (const auto& run : r.runs) {
    end += run.bytes;
    if (offset < end) return run.node;
  }
  return -1;
}

int MapNode(int recorded, int nodes) {
  if (recorded < 0 || nodes <= 0) return -1;
  return recorded < nodes ? recorded : recorded % nodes;
}

std::vector<int> MapCpus(const std::vector<int>& recorded, const os::Topology& topology) {
  std::vector<int> here;
  for (const auto& n : topology.node_cpus) here.insert(here.end(), n.begin(), n.end());
  std::sort(here.begin(), here.end());
  std::vector<int> out;
  if (here.empty()) return recorded;
  for (int cpu : recorded) {
    if (std::binary_search(here.begin(), here.end(), cpu)) {
      out.push_back(cpu);
    } else {
      out.push_back(here[static_cast<size_t>(cpu) % here.size()]);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Status ApplyRegion(os::Numa& numa, const format::RegionPlacement* r, void* data, size_t bytes,
                   PlacementMode mode, std::vector<BoundRange>* bound) {
  const uintptr_t base = reinterpret_cast<uintptr_t>(data);
  uintptr_t b = 0;
  size_t len = 0;
  if (mode == PlacementMode::kKeep || bytes == 0) return Status::Ok();
  if (mode == PlacementMode::kInterleave) {
    if (!InnerPages(base, bytes, &b, &len)) return Status::Ok();
    bound->push_back({reinterpret_cast<void*>(b), len});
    return numa.Bind(reinterpret_cast<void*>(b), len, os::Binding{.node = -1});
  }
  if (r == nullptr || r->bytes != bytes) return Status::Ok();  // nothing recorded for this region
  const int nodes = numa.topology().nodes();
  uint64_t offset = 0;
  for (const auto& run : r->runs) {
    const uint64_t at = offset;
    offset += run.bytes;
    const int node = MapNode(run.node, nodes);
    if (node < 0 || !InnerPages(base + at, run.bytes, &b, &len)) continue;
    bound->push_back({reinterpret_cast<void*>(b), len});
    CAIRN_RETURN_IF_ERROR(numa.Bind(reinterpret_cast<void*>(b), len, os::Binding{.node = node}));
  }
  return Status::Ok();
}

Status Unbind(os::Numa& numa, const std::vector<BoundRange>& bound) {
  Status first;
  for (const auto& r : bound) {
    Status s = numa.Unbind(r.addr, r.bytes);
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

}  // namespace cairn::core
