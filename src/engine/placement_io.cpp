// Pipeline::PlacementOf: where a restore finds a version's placement record.
#include "engine/pipeline.hpp"
#include "format/naming.hpp"
#include "format/placement.hpp"

namespace cairn::core {

Result<format::Placement> Pipeline::PlacementOf(const std::string& name, int64_t version) {
  CAIRN_RETURN_IF_ERROR(format::ValidateName(name));
  const auto kind = format::EntryKind::kCheckpoint;
  {
    MutexLock lock(&mu_);
    if (EntryPtr e = catalog_.Find(kind, name, version); e && e->placement && !e->failed()) {
      return *e->placement;
    }
  }
  Status last = Status::NotFound("no placement record for " + format::EntryLabel(kind, name, version));
  const tiers::FileTier* tiers[2] = {&local_, persistent_ ? &*persistent_ : nullptr};
  for (const tiers::FileTier* tier : tiers) {
    if (tier == nullptr || !tier->Exists(name, kind, version)) continue;
    auto p = format::ReadPlacementOf(tier->fs(), tier->EntryPath(name, kind, version));
    if (p.ok()) return p;
    if (last.code() == Code::kNotFound) last = p.status();
  }
  return last;
}

}  // namespace cairn::core
