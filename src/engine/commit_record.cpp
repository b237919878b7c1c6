#include "engine/commit_record.hpp"

#include <algorithm>

namespace cairn::core {

void CommitRecord::NoteLocal(const std::string& name, int64_t v, int64_t realtime_ns) {
  Local& newest = local_[name];
  if (v <= newest.version) return;
  newest.version = v;
  newest.realtime_ns = realtime_ns;
}

CommitRecord::Local CommitRecord::NewestLocal(const std::string& name) const {
  auto it = local_.find(name);
  return it == local_.end() ? Local{} : it->second;
}

bool CommitRecord::RaiseGlobal(const std::string& name, int64_t global, int64_t common) {
  Job& j = job_[name];
  j.common = std::max(j.common, common);
  if (global <= j.global) return false;
  j.global = global;
  return true;
}

int64_t CommitRecord::Global(const std::string& name) const {
  auto it = job_.find(name);
  return it == job_.end() ? -1 : it->second.global;
}

int64_t CommitRecord::Common(const std::string& name) const {
  auto it = job_.find(name);
  return it == job_.end() ? -1 : it->second.common;
}

}  // namespace cairn::core
