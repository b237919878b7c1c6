// VELOC's checkpoint and restart phases over one cairn::Client (docs/veloc.md).
//
// A VELOC checkpoint is one Cairn version of the same name, numbered as
// compat/peer_version.hpp says: a VELOC version taken again is a new Cairn
// version, and the restart finds the newest one taken. Besides
// the application's memory regions it holds the captured files (Route_file)
// and a table of contents: a fixed header region (kMetaHeader) and the table
// (kMetaTable) naming each region's VELOC id, kind and size and each file's
// original path. The restart reads the header, then the table, then the
// files, each by protecting just those regions and restoring the version:
// Cairn restores the protected regions and leaves the others alone.
#include "compat/veloc/veloc_shim.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <regex>

#include "cairn/group.hpp"
#include "veloc/defs.h"

namespace cairn::veloc {
namespace {

constexpr uint64_t kMagic = 0x4c45564e52494143ull;  // "CAIRNVEL"
constexpr uint64_t kFormat = 1;

Status CheckName(const char* name, int version) {
  // VELOC's own rule (its client's validate_name): Cairn's names allow more.
  static const std::regex valid("[a-zA-Z0-9_\\.]+");
  if (name == nullptr || !std::regex_match(name, valid)) {
    return Status::InvalidArgument(std::string("checkpoint name '") + (name ? name : "(null)") +
                                   "' is invalid: only [a-zA-Z0-9_.] characters, at least one");
  }
  if (version < 0) {
    return Status::InvalidArgument("checkpoint version " + std::to_string(version) + " is negative");
  }
  return Status::Ok();
}

// VELOC's selection modes: ALL ignores ids, SOME keeps them, REST drops them.
Result<bool> Selected(int mode, const std::set<int>& ids, int id) {
  switch (mode) {
    case VELOC_CKPT_ALL: return true;  // == VELOC_RECOVER_ALL
    case VELOC_CKPT_SOME: return ids.count(id) != 0;
    case VELOC_CKPT_REST: return ids.count(id) == 0;
    default: return Status::InvalidArgument("selection mode " + std::to_string(mode) + " is none of ALL (0), SOME (1), REST (2)");
  }
}

Result<std::set<int>> IdSet(const int* ids, int id_count) {
  if (id_count < 0 || (id_count > 0 && ids == nullptr)) {
    return Status::InvalidArgument("id list: " + std::to_string(id_count) + " ids at " + (ids ? "a pointer" : "NULL"));
  }
  return std::set<int>(ids, ids + id_count);
}

Result<std::string> GroupName(const char* group) {
  if (group == nullptr) return Status::InvalidArgument("the checkpoint name of a region group is NULL");
  return std::string(group);
}

}  // namespace

Shim::Shim(std::unique_ptr<Client> client, bool sync, std::string scratch_root, std::string tag, int unique_id)
    : client_(std::move(client)),
      sync_(sync),
      scratch_root_(std::move(scratch_root)),
      tag_(std::move(tag)),
      unique_id_(unique_id) {}

Status Shim::MemProtect(int id, void* ptr, size_t count, size_t base_size, const char* group) {
  CAIRN_ASSIGN_OR_RETURN(std::string g, GroupName(group));
  if (id < kReservedBelow) {
    return Status::InvalidArgument("region id " + std::to_string(id) + " is reserved (ids below INT_MIN + 65536 are libcairn_veloc's)");
  }
  if (count == 0) {  // VELOC's documented way to drop a region
    groups_[g].erase(id);
    return Status::Ok();
  }
  if (base_size != 0 && count > std::numeric_limits<size_t>::max() / base_size) {
    return Status::InvalidArgument("region " + std::to_string(id) + ": count * base_size overflows");
  }
  if (ptr == nullptr) return Status::InvalidArgument("region " + std::to_string(id) + ": ptr is NULL");
  groups_[g][id] = {ptr, count * base_size};
  return Status::Ok();
}

Status Shim::MemUnprotect(int id, const char* group) {
  CAIRN_ASSIGN_OR_RETURN(std::string g, GroupName(group));
  if (groups_[g].erase(id) == 0) {
    return Status::NotFound("region " + std::to_string(id) + " is not protected" + (g.empty() ? "" : " in the group of '" + g + "'"));
  }
  return Status::Ok();
}

Status Shim::MemClear(const char* group) {
  CAIRN_ASSIGN_OR_RETURN(std::string g, GroupName(group));
  groups_[g].clear();
  return Status::Ok();
}

std::map<int, Shim::Region>& Shim::Regions() {
  auto named = groups_.find(name_);
  return named != groups_.end() && !named->second.empty() ? named->second : groups_[""];
}

Status Shim::Register(const std::map<int, Region>& want) {
  for (auto it = registered_.begin(); it != registered_.end();) {
    auto w = want.find(it->first);
    if (w == want.end() || !(w->second == it->second)) {
      CAIRN_RETURN_IF_ERROR(client_->Unprotect(it->first));
      it = registered_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [id, r] : want) {
    if (registered_.count(id) != 0) continue;
    CAIRN_RETURN_IF_ERROR(client_->Protect(id, r.ptr, r.bytes));
    registered_[id] = r;
  }
  return Status::Ok();
}

Status Shim::DropFileRegions() {
  for (auto it = registered_.begin(); it != registered_.end();) {
    if (it->first >= kFirstFile && it->first < kReservedBelow) {
      CAIRN_RETURN_IF_ERROR(client_->Unprotect(it->first));
      it = registered_.erase(it);
    } else {
      ++it;
    }
  }
  return Status::Ok();
}

// --- Checkpoint --------------------------------------------------------------

Status Shim::CheckpointBegin(const char* name, int version) {
  if (phase_ != Phase::kNone) return Status::State("VELOC_Checkpoint_begin: a checkpoint or restart phase is open (nested phases are not supported)");
  CAIRN_RETURN_IF_ERROR(CheckName(name, version));
  phase_ = Phase::kCheckpoint;
  name_ = name;
  version_ = version;
  mem_selected_ = false;
  selection_.clear();
  files_.clear();
  return Status::Ok();
}

Status Shim::CheckpointSelective(int mode, const int* ids, int id_count) {
  if (phase_ != Phase::kCheckpoint) return Status::State("VELOC_Checkpoint_mem: call VELOC_Checkpoint_begin first");
  CAIRN_ASSIGN_OR_RETURN(std::set<int> set, IdSet(ids, id_count));
  std::set<int> chosen;
  for (const auto& [id, r] : Regions()) {
    CAIRN_ASSIGN_OR_RETURN(bool take, Selected(mode, set, id));
    if (take) chosen.insert(id);
  }
  if (chosen.empty()) {
    return Status::InvalidArgument("empty selection of memory regions to checkpoint (" + std::to_string(Regions().size()) + " protected for '" + name_ + "')");
  }
  mem_selected_ = true;
  selection_.insert(chosen.begin(), chosen.end());
  return Status::Ok();
}

// The capture: the selected regions, the routed files and the table of
// contents, as version version_ of name_, in one cairn::Client::Checkpoint.
Status Shim::CheckpointEnd() {
  if (phase_ != Phase::kCheckpoint) return Status::State("VELOC_Checkpoint_end: no checkpoint phase is open");
  phase_ = Phase::kNone;
  if (!mem_selected_ && files_.empty()) {
    return Status::InvalidArgument("checkpoint '" + name_ + "' version " + std::to_string(version_) +
                                   ": nothing to save (neither VELOC_Checkpoint_mem nor VELOC_Route_file was called)");
  }
  std::map<int, Region> want;
  table_.clear();
  std::map<int, Region>& regions = Regions();
  for (int id : selection_) {
    auto it = regions.find(id);
    if (it == regions.end()) continue;  // unprotected since Checkpoint_mem
    want[id] = it->second;
    table_.push_back({id, TableEntry::kMemory, it->second.bytes, {}});
  }
  Status s = CaptureFiles(&want);
  if (s.ok()) {
    table_bytes_.clear();
    for (const TableEntry& e : table_) {
      const uint32_t len = static_cast<uint32_t>(e.file.size());
      const size_t at = table_bytes_.size();
      table_bytes_.resize(at + 20 + len);
      std::memcpy(&table_bytes_[at], &e.id, 4);
      std::memcpy(&table_bytes_[at + 4], &e.kind, 4);
      std::memcpy(&table_bytes_[at + 8], &e.bytes, 8);
      std::memcpy(&table_bytes_[at + 16], &len, 4);
      std::memcpy(&table_bytes_[at + 20], e.file.data(), len);
    }
    header_[0] = kMagic;
    header_[1] = kFormat;
    header_[2] = table_.size();
    header_[3] = table_bytes_.size();
    want[kMetaHeader] = {header_, sizeof header_};
    want[kMetaTable] = {table_bytes_.data(), table_bytes_.size()};
    s = Register(want);
  }
  if (s.ok()) {
    Result<int64_t> v = versions_.Next(*client_, name_, version_);
    s = v.status();
    if (v.ok()) cairn_version_ = *v;
  }
  if (s.ok()) s = client_->Checkpoint(name_, cairn_version_);
  // The files are in Cairn's cache now (or the capture failed): drop the
  // copies, unprotected first (Cairn's regions must stay valid while protected).
  if (Status d = DropFileRegions(); s.ok()) s = d;
  file_data_.clear();
  RemovePhaseFiles();
  CAIRN_RETURN_IF_ERROR(s);
  last_name_ = name_;
  last_version_ = cairn_version_;
  found_name_.clear();  // a restart now must see this checkpoint too
  if (sync_) return CheckpointWait();
  return Status::Ok();
}

Status Shim::CheckpointWait() {
  if (phase_ == Phase::kCheckpoint) return Status::State("VELOC_Checkpoint_wait: end the checkpoint phase first (VELOC_Checkpoint_end)");
  if (last_version_ < 0) return Status::Ok();
  const std::string name = last_name_;
  const int64_t version = last_version_;
  last_version_ = -1;
  return client_->Wait(name, version, Level::kPersistent);
}

Result<bool> Shim::BackendReady() {
  if (last_version_ < 0) return true;
  auto state = ProgressGlobalCommit(*client_, last_name_);
  if (!state.ok()) return true;  // not in a group: no probe without blocking (docs/veloc.md)
  return state->local_version >= last_version_;
}

// --- Restart -----------------------------------------------------------------

Status Shim::FindTaken(const std::string& name) {
  found_name_.clear();
  found_.clear();
  Result<int64_t> v = client_->Latest(name);
  if (v.ok()) versions_.Seed(name, *v);
  while (v.ok()) {
    found_.try_emplace(compat::PeerId(*v), *v);  // newest first: the first of each id stays
    if (*v == 0) break;
    v = client_->Latest(name, *v - 1);
  }
  if (!v.ok() && v.status().code() != Code::kNotFound) return v.status();
  found_name_ = name;
  return Status::Ok();
}

Result<int64_t> Shim::RestartTest(const char* name, int bound) {
  CAIRN_RETURN_IF_ERROR(CheckName(name, bound));
  CAIRN_RETURN_IF_ERROR(FindTaken(name));
  for (auto it = found_.rbegin(); it != found_.rend(); ++it) {
    if (bound == 0 || it->first <= bound) return it->first;
  }
  return Status::NotFound("no intact version of '" + std::string(name) + "'" +
                          (bound == 0 ? "" : " numbered " + std::to_string(bound) + " or less"));
}

Result<int64_t> Shim::NewestTaken() {
  if (found_name_ != name_) CAIRN_RETURN_IF_ERROR(FindTaken(name_));
  auto it = found_.find(version_);
  if (it == found_.end()) {
    return Status::NotFound("version " + std::to_string(version_) + " of '" + name_ + "' has no intact checkpoint");
  }
  return it->second;
}

Status Shim::RestartBegin(const char* name, int version) {
  if (phase_ != Phase::kNone) return Status::State("VELOC_Restart_begin: a checkpoint or restart phase is open");
  CAIRN_RETURN_IF_ERROR(CheckName(name, version));
  name_ = name;
  version_ = version;
  CAIRN_ASSIGN_OR_RETURN(cairn_version_, NewestTaken());
  CAIRN_RETURN_IF_ERROR(ReadTable());
  CAIRN_RETURN_IF_ERROR(MaterializeFiles());
  phase_ = Phase::kRestart;
  return Status::Ok();
}

Status Shim::ReadTable() {
  const std::string what = "version " + std::to_string(version_) + " of '" + name_ + "'";
  header_[0] = 0;
  CAIRN_RETURN_IF_ERROR(Register({{kMetaHeader, {header_, sizeof header_}}}));
  Status s = client_->Restore(name_, cairn_version_);
  if (s.code() == Code::kNotFound || s.code() == Code::kSizeMismatch) {
    return Status(s.code(), what + " has no libcairn_veloc table of contents (not written through VELOC's API?): " + s.message());
  }
  CAIRN_RETURN_IF_ERROR(s);
  if (header_[0] != kMagic || header_[1] != kFormat) {
    return Status::Corrupt(what + ": its table of contents has an unknown magic or format " + std::to_string(header_[1]));
  }
  table_bytes_.assign(header_[3], 0);
  CAIRN_RETURN_IF_ERROR(Register({{kMetaHeader, {header_, sizeof header_}},
                                  {kMetaTable, {table_bytes_.data(), table_bytes_.size()}}}));
  CAIRN_RETURN_IF_ERROR(client_->Restore(name_, cairn_version_));
  table_.clear();
  size_t at = 0;
  for (uint64_t i = 0; i < header_[2]; ++i) {
    TableEntry e;
    uint32_t len = 0;
    if (at + 20 > table_bytes_.size()) return Status::Corrupt(what + ": its table of contents is truncated");
    std::memcpy(&e.id, &table_bytes_[at], 4);
    std::memcpy(&e.kind, &table_bytes_[at + 4], 4);
    std::memcpy(&e.bytes, &table_bytes_[at + 8], 8);
    std::memcpy(&len, &table_bytes_[at + 16], 4);
    if (at + 20 + len > table_bytes_.size()) return Status::Corrupt(what + ": its table of contents is truncated");
    e.file.assign(reinterpret_cast<const char*>(&table_bytes_[at + 20]), len);
    at += 20 + len;
    table_.push_back(std::move(e));
  }
  return Status::Ok();
}

Status Shim::RecoverSelective(int mode, const int* ids, int id_count) {
  if (phase_ != Phase::kRestart) return Status::State("VELOC_Recover_mem: call VELOC_Restart_begin first");
  CAIRN_ASSIGN_OR_RETURN(std::set<int> set, IdSet(ids, id_count));
  // The header is always among them: a restore with no region protected
  // would be no restore at all on this rank, and the call is collective.
  std::map<int, Region> want = {{kMetaHeader, {header_, sizeof header_}}};
  for (const TableEntry& e : table_) {
    if (e.kind != TableEntry::kMemory) continue;
    CAIRN_ASSIGN_OR_RETURN(bool take, Selected(mode, set, e.id));
    if (!take) continue;
    auto it = Regions().find(e.id);
    if (it == Regions().end()) {
      return Status::NotFound("no protected memory region for id " + std::to_string(e.id) + ", which version " +
                              std::to_string(version_) + " of '" + name_ + "' holds");
    }
    if (it->second.bytes != e.bytes) {
      return Status::SizeMismatch("region " + std::to_string(e.id) + " is protected with " + std::to_string(it->second.bytes) +
                                  " bytes but version " + std::to_string(version_) + " of '" + name_ + "' has " +
                                  std::to_string(e.bytes) + " (Cairn restores a region into one of the same size)");
    }
    want[e.id] = it->second;
  }
  CAIRN_RETURN_IF_ERROR(Register(want));
  return client_->Restore(name_, cairn_version_);
}

Result<int64_t> Shim::RecoverSize(int id) const {
  if (phase_ != Phase::kRestart) return Status::State("VELOC_Recover_size: call VELOC_Restart_begin first");
  for (const TableEntry& e : table_) {
    if (e.kind == TableEntry::kMemory && e.id == id) return static_cast<int64_t>(e.bytes);
  }
  return Status::NotFound("version " + std::to_string(version_) + " of '" + name_ + "' has no region " + std::to_string(id));
}

Status Shim::RestartEnd() {
  if (phase_ != Phase::kRestart) return Status::State("VELOC_Restart_end: no restart phase is open");
  phase_ = Phase::kNone;
  RemovePhaseFiles();
  return Status::Ok();
}

Status Shim::Cleanup(const char* name) {
  if (phase_ != Phase::kNone) return Status::State("VELOC_Cleanup: end the checkpoint or restart phase first");
  CAIRN_RETURN_IF_ERROR(CheckName(name, 0));
  return RemoveLocalCopies(*client_, name);
}

Status Shim::Close(bool drain) {
  Status s = drain ? CheckpointWait() : Status::Ok();
  Status c = client_->Close();
  return s.ok() ? c : s;
}

}  // namespace cairn::veloc
