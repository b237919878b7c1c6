#include "tiers/file_tier.hpp"

#include <algorithm>

#include "format/naming.hpp"
#include "format/placement.hpp"

namespace cairn::tiers {
namespace {

// "/a/b" -> "/a"; "b" -> "."; "/b" -> "/".
std::string Parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

std::string FileTier::NameDir(std::string_view name) const {
  return os::JoinPath(dir_, std::string(name));
}

std::string FileTier::EntryPath(std::string_view name, format::EntryKind kind, int64_t number) const {
  return format::EntryPath(dir_, name, kind, number);
}

Status FileTier::EnsureDir() const {
  // The directories mkdir -p is about to create: dir_ and missing ancestors.
  std::vector<std::string> to_sync{Parent(dir_)};
  for (std::string p = dir_; p != "." && p != "/" && !fs_->Stat(p).ok(); p = Parent(p)) {
    if (Parent(p) != to_sync.front()) to_sync.push_back(Parent(p));
  }
  CAIRN_RETURN_IF_ERROR(fs_->CreateDirs(dir_, 0700));
  if (!options_.fsync) return Status::Ok();
  for (const std::string& d : to_sync) CAIRN_RETURN_IF_ERROR(fs_->SyncDir(d));
  return Status::Ok();
}

Status FileTier::EnsureNameDir(std::string_view name) const {
  CAIRN_RETURN_IF_ERROR(fs_->CreateDirs(NameDir(name), 0700));
  return options_.fsync ? fs_->SyncDir(dir_) : Status::Ok();
}

Result<std::vector<int64_t>> FileTier::ListCommitted(std::string_view name,
                                                     format::EntryKind kind) const {
  std::vector<int64_t> numbers;
  auto entries = fs_->List(NameDir(name));
  if (!entries.ok()) {
    if (entries.status().code() == Code::kNotFound) return numbers;
    return entries.status();
  }
  for (const auto& e : *entries) {
    if (e.is_dir) continue;
    auto parsed = format::ParseEntryFileName(e.name);
    if (parsed && parsed->kind == kind) numbers.push_back(parsed->number);
  }
  std::sort(numbers.begin(), numbers.end());
  return numbers;
}

bool FileTier::Exists(std::string_view name, format::EntryKind kind, int64_t number) const {
  return fs_->Stat(EntryPath(name, kind, number)).ok();
}

Status FileTier::RemoveEntry(std::string_view name, format::EntryKind kind, int64_t number) const {
  if (kind == format::EntryKind::kCheckpoint) {  // its placement record first (format.md 5.1)
    (void)fs_->Remove(format::PlacementPath(dir_, name, number));
  }
  Status s = fs_->Remove(EntryPath(name, kind, number));
  if (s.code() == Code::kNotFound) return Status::Ok();
  return s;
}

}  // namespace cairn::tiers
