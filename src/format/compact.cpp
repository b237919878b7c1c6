// CompactVersion: stream a chain's logical content, window by window, into a
// full version written over the tip (docs/format.md 4.8).
#include "format/compact.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "format/chain.hpp"
#include "format/naming.hpp"
#include "util/crc32c.hpp"

namespace cairn::format {
namespace {

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};

// Writes the blocks of region r of `out` from the chain, `window` bytes at a time.
Status CopyRegion(os::FileSystem* fs, const Chain& chain, const Layout& out, uint32_t r,
                  uint8_t* buf, uint64_t window, FileWriter& w) {
  const Layout::Region& reg = out.regions[r];
  const uint64_t bb = out.block_bytes;
  for (uint64_t lo = 0; lo < reg.spec.bytes; lo += window) {
    const uint64_t n = std::min(window, reg.spec.bytes - lo);
    std::memset(buf + n, 0, AlignUp(n) - n);  // direct writes read the padding
    const RegionTarget t{reg.spec.id, buf, true, lo, n};
    CAIRN_RETURN_IF_ERROR(RestoreChain(fs, chain, {&t, 1}));
    for (uint64_t off = 0; off < n; off += bb) {
      const uint32_t index = reg.first_block + static_cast<uint32_t>((lo + off) / bb);
      const uint32_t len = out.blocks[index].length;
      CAIRN_RETURN_IF_ERROR(w.WriteBlock(index, buf + off, crc32c::Value(buf + off, len)));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<CompactResult> CompactVersion(os::FileSystem* fs, const std::string& dir,
                                     const std::string& name, int64_t number, EntryKind kind,
                                     const WriterOptions& options, uint64_t window_bytes) {
  CAIRN_ASSIGN_OR_RETURN(Chain chain, Chain::Open(fs, dir, name, number, kind));
  const FileReader& tip = chain.tip();
  CompactResult result;
  result.old_depth = chain.depth();
  result.old_file_bytes = tip.file_bytes();
  result.new_file_bytes = tip.file_bytes();
  if (result.old_depth == 0) return result;

  std::vector<RegionSpec> specs;
  for (const Layout::Region& reg : tip.layout().regions) specs.push_back(reg.spec);
  // Same content, same id: versions that name this one as their base stay valid.
  const VersionRecord full{tip.record().content_id, -1, 0, 0};
  const Layout out = Layout::MakeV2(specs, Layout::FullExtents(specs), tip.layout().block_bytes, full);
  const uint64_t bb = out.block_bytes;
  const uint64_t window = std::max<uint64_t>(bb, window_bytes / bb * bb);
  std::unique_ptr<uint8_t, FreeDeleter> buf(static_cast<uint8_t*>(std::aligned_alloc(kAlignment, window)));
  if (!buf) return Status::NoMemory("compact: cannot allocate " + std::to_string(window) + " bytes");

  FileInfo info = tip.info();
  info.created_unix_ns = 0;  // the writer stamps the rewrite
  CAIRN_ASSIGN_OR_RETURN(auto w, FileWriter::Create(fs, tip.path(), info, out, options));
  for (uint32_t r = 0; r < out.regions.size(); ++r) {
    CAIRN_RETURN_IF_ERROR(CopyRegion(fs, chain, out, r, buf.get(), window, *w));
  }
  CAIRN_RETURN_IF_ERROR(w->Commit());
  auto st = fs->Stat(tip.path());
  if (st.ok()) result.new_file_bytes = st->size;
  return result;
}

}  // namespace cairn::format
