#include "tiers/file_tier.hpp"

#include <algorithm>

#include "format/naming.hpp"

namespace cairn::tiers {

std::string FileTier::NameDir(std::string_view name) const {
  return os::JoinPath(dir_, std::string(name));
}

std::string FileTier::EntryPath(std::string_view name, format::EntryKind kind, int64_t number) const {
  return format::EntryPath(dir_, name, kind, number);
}

Status FileTier::EnsureNameDir(std::string_view name) const {
  return fs_->CreateDirs(NameDir(name), 0700);
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
  Status s = fs_->Remove(EntryPath(name, kind, number));
  if (s.code() == Code::kNotFound) return Status::Ok();
  return s;
}

}  // namespace cairn::tiers
