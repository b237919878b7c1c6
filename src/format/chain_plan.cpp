// ChainPlan: which blocks of which link restore a window of a region
// (docs/format.md 4.7). Per target, the links are walked newest first while
// `covered` (a canonical ExtentList in region offsets) grows by each link's
// extents: what a link stores outside `covered` is visible from the tip and
// is read from that link; the rest is hidden by a newer link and skipped.
//
// The full version at the chain's end is the exception: a block of it with
// anything visible is read whole, straight into place, and the layers'
// pieces are copied over it afterwards (Execute runs the links oldest
// first). Scattering the base's visible gaps instead (after scattered random
// page changes, nearly every base block has some) cost a memcpy per gap and
// a staging pass per block: a depth-10 chain restored 1.96x slower than a
// full version for 1.5x the bytes.
#include <algorithm>
#include <atomic>

#include "format/chain.hpp"

namespace cairn::format {

// A piece of a link's packed stream and where it goes, before grouping.
struct PlannedPiece {
  uint32_t block;
  ScatterPiece piece;
  bool host;
  bool stage;
};

class ChainPlanner {
 public:
  explicit ChainPlanner(const Chain& chain) : chain_(chain), pieces_(chain.links().size()) {}

  Status AddTarget(const RegionTarget& t);
  ChainPlan Finish();

 private:
  void AddVisible(size_t link, uint32_t region, uint64_t packed, uint64_t bytes, uint8_t* dst,
                  const RegionTarget& t);
  // The base's pieces from index `first` on: each block wholly inside the
  // window [lo, hi) becomes one whole-block piece (read into place).
  void WidenBase(size_t first, uint64_t lo, uint64_t hi);

  const Chain& chain_;
  std::vector<std::vector<PlannedPiece>> pieces_;  // per link, in plan order
};

namespace {

// The union of two canonical lists, canonical.
ExtentList Union(const ExtentList& a, const Extent* b, uint32_t nb) {
  ExtentList out;
  out.reserve(a.size() + nb);
  size_t i = 0, j = 0;
  while (i < a.size() || j < nb) {
    const bool take_a = j == nb || (i < a.size() && a[i].offset <= b[j].offset);
    const Extent& e = take_a ? a[i++] : b[j++];
    AppendExtent(out, e.offset, e.bytes);
  }
  return out;
}

}  // namespace

Status ChainPlanner::AddTarget(const RegionTarget& t) {
  const FileReader& tip = chain_.tip();
  const int tr = tip.FindRegion(t.id);
  if (tr < 0) {
    return Status::InvalidArgument(tip.path() + ": no region id " + std::to_string(t.id));
  }
  const uint64_t size = tip.layout().regions[tr].spec.bytes;
  if (t.offset > size) {
    return Status::InvalidArgument(tip.path() + ": region id " + std::to_string(t.id) +
                                   ": offset " + std::to_string(t.offset) + " past its " +
                                   std::to_string(size) + " bytes");
  }
  const uint64_t lo = t.offset, hi = lo + std::min(t.bytes, size - lo);
  auto* dst = static_cast<uint8_t*>(t.dst);
  ExtentList covered;
  uint64_t visible = 0;
  const size_t base = chain_.links().size() - 1;
  const size_t base_first = pieces_[base].size();
  for (size_t i = 0; i < chain_.links().size(); ++i) {
    const FileReader& f = *chain_.links()[i];
    const uint32_t r = static_cast<uint32_t>(f.FindRegion(t.id));  // Chain::Open checked it
    const Extent* ext = f.layout().region_extents(r);
    const uint32_t n = f.layout().regions[r].extent_count;
    uint64_t packed = 0;  // packed offset of ext[k]
    for (uint32_t k = 0; k < n; packed += ext[k].bytes, ++k) {
      const uint64_t a = std::max(ext[k].offset, lo), b = std::min(ext[k].end(), hi);
      if (a >= b) continue;
      // [a, b) minus covered: the gaps between covered extents.
      auto c = std::lower_bound(covered.begin(), covered.end(), a,
                                [](const Extent& e, uint64_t x) { return e.end() <= x; });
      for (uint64_t x = a; x < b;) {
        if (c != covered.end() && c->offset <= x) {
          x = c->end();
          ++c;
          continue;
        }
        const uint64_t y = c == covered.end() ? b : std::min(b, c->offset);
        AddVisible(i, r, packed + (x - ext[k].offset), y - x, dst + (x - lo), t);
        visible += y - x;
        x = y;
      }
    }
    covered = Union(covered, ext, n);
  }
  if (!chain_.links()[base]->record().layered()) WidenBase(base_first, lo, hi);
  if (visible != hi - lo) {  // the full version at the end covers everything
    return Status::Internal(tip.path() + ": chain covers " + std::to_string(visible) + " of " +
                            std::to_string(hi - lo) + " bytes of region id " +
                            std::to_string(t.id));
  }
  return Status::Ok();
}

// Cuts a visible run of link `link`'s packed stream at block boundaries.
void ChainPlanner::AddVisible(size_t link, uint32_t region, uint64_t packed, uint64_t bytes,
                              uint8_t* dst, const RegionTarget& t) {
  const Layout& l = chain_.links()[link]->layout();
  const uint64_t bb = l.block_bytes;
  while (bytes > 0) {
    const uint32_t block = l.regions[region].first_block + static_cast<uint32_t>(packed / bb);
    const uint64_t off = packed % bb;
    const uint64_t take = std::min<uint64_t>(bytes, l.blocks[block].length - off);
    pieces_[link].push_back(PlannedPiece{
        block, ScatterPiece{static_cast<uint32_t>(off), static_cast<uint32_t>(take), dst}, t.host,
        t.stage});
    packed += take;
    bytes -= take;
    dst += take;
  }
}

void ChainPlanner::WidenBase(size_t first, uint64_t lo, uint64_t hi) {
  std::vector<PlannedPiece>& ps = pieces_.back();
  const Layout& l = chain_.links().back()->layout();
  std::vector<PlannedPiece> out(ps.begin(), ps.begin() + static_cast<ptrdiff_t>(first));
  for (size_t k = first; k < ps.size();) {
    size_t end = k + 1;
    while (end < ps.size() && ps[end].block == ps[k].block) ++end;
    const Layout::Block& b = l.blocks[ps[k].block];
    const Layout::Region& r = l.regions[b.region];
    const uint64_t start = b.offset - r.data_offset;  // a full region: packed offset = region offset
    if (start >= lo && start + b.length <= hi) {
      PlannedPiece whole = ps[k];
      whole.piece.dst = static_cast<uint8_t*>(ps[k].piece.dst) - ps[k].piece.offset;
      whole.piece.offset = 0;
      whole.piece.bytes = b.length;
      out.push_back(whole);
    } else {
      out.insert(out.end(), ps.begin() + static_cast<ptrdiff_t>(k), ps.begin() + static_cast<ptrdiff_t>(end));
    }
    k = end;
  }
  ps = std::move(out);
}

// Groups consecutive pieces of one block into one BlockRead: a block wholly
// visible in one piece is read straight into place, any other scattered.
ChainPlan ChainPlanner::Finish() {
  ChainPlan plan;
  plan.links_.resize(pieces_.size());
  for (size_t i = 0; i < pieces_.size(); ++i) {
    ChainPlan::LinkReads& lr = plan.links_[i];
    lr.file = chain_.links()[i].get();
    const std::vector<PlannedPiece>& ps = pieces_[i];
    lr.pieces.reserve(ps.size());
    std::vector<std::pair<size_t, size_t>> ranges;  // [first, last) into lr.pieces per read
    for (size_t k = 0; k < ps.size();) {
      size_t end = k + 1;
      while (end < ps.size() && ps[end].block == ps[k].block) ++end;
      BlockRead read{.block = ps[k].block, .dst = nullptr, .host = ps[k].host, .stage = ps[k].stage};
      const uint32_t length = lr.file->layout().blocks[ps[k].block].length;
      if (end == k + 1 && ps[k].piece.offset == 0 && ps[k].piece.bytes == length) {
        read.dst = ps[k].piece.dst;
        ranges.emplace_back(0, 0);
      } else {
        ranges.emplace_back(lr.pieces.size(), lr.pieces.size() + (end - k));
        for (size_t j = k; j < end; ++j) lr.pieces.push_back(ps[j].piece);
      }
      lr.reads.push_back(read);
      k = end;
    }
    // lr.pieces no longer grows: the spans stay valid.
    for (size_t r = 0; r < lr.reads.size(); ++r) {
      const auto [first, last] = ranges[r];
      if (last > first) lr.reads[r].pieces = {lr.pieces.data() + first, last - first};
    }
  }
  return plan;
}

Result<ChainPlan> ChainPlan::Make(const Chain& chain, std::span<const RegionTarget> targets) {
  ChainPlanner planner(chain);
  for (const RegionTarget& t : targets) CAIRN_RETURN_IF_ERROR(planner.AddTarget(t));
  return planner.Finish();
}

Status ChainPlan::Execute(os::FileSystem* fs, const CopyOutFn& copy_out,
                          const ReadBlocksOptions& options) const {
  // The base first: its whole blocks land before the layers' pieces that
  // overwrite parts of them. One staging pool for every link.
  StagingPool pool;
  ReadBlocksOptions o = options;
  if (o.staging == nullptr) o.staging = &pool;
  CAIRN_RETURN_IF_ERROR(ReadBlocks(fs, *links_.back().file, links_.back().reads, copy_out, o));
  const size_t layers = links_.size() - 1;
  const bool host = std::all_of(links_.begin(), links_.end() - 1, [](const LinkReads& lr) {
    return std::all_of(lr.reads.begin(), lr.reads.end(), [](const BlockRead& r) { return r.host; });
  });
  if (layers <= 1 || !host || options.queue_depth <= 1) {
    for (size_t i = layers; i-- > 0;) {
      CAIRN_RETURN_IF_ERROR(ReadBlocks(fs, *links_[i].file, links_[i].reads, copy_out, o));
    }
    return Status::Ok();
  }
  // The layers' pieces are disjoint (each byte comes from one link), so they
  // may land in any order: up to queue_depth layer files are read at once,
  // one read in flight each. A layer holds a few blocks; read one file after
  // the other, each pass ends with the device half idle (a depth-10 chain
  // spent ~40% more per layer than its bytes). Host destinations only: a
  // device copy_out is serialized per ReadBlocks call.
  std::vector<Status> status(layers);
  std::atomic<size_t> next{0};
  auto work = [&] {
    ReadBlocksOptions one = o;
    one.queue_depth = 1;
    for (size_t i; (i = next.fetch_add(1)) < layers;) {
      status[i] = ReadBlocks(fs, *links_[i].file, links_[i].reads, copy_out, one);
    }
  };
  RunWorkers(std::min<size_t>(options.queue_depth, layers), work);
  for (size_t i = layers; i-- > 0;) CAIRN_RETURN_IF_ERROR(status[i]);  // the oldest failure first
  return Status::Ok();
}

std::vector<uint64_t> ChainPlan::read_bytes() const {
  std::vector<uint64_t> out;
  for (const LinkReads& lr : links_) {
    uint64_t n = 0;
    for (const BlockRead& r : lr.reads) n += lr.file->layout().blocks[r.block].length;
    out.push_back(n);
  }
  return out;
}

Status RestoreChain(os::FileSystem* fs, const Chain& chain, std::span<const RegionTarget> targets,
                    const CopyOutFn& copy_out, const ReadBlocksOptions& options) {
  CAIRN_ASSIGN_OR_RETURN(ChainPlan plan, ChainPlan::Make(chain, targets));
  return plan.Execute(fs, copy_out, options);
}

}  // namespace cairn::format
