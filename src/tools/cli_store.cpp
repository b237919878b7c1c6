// Listing and verifying a Cairn directory for the `cairn` tool (cli_store.hpp).
#include "tools/cli_store.hpp"

#include <algorithm>
#include <string_view>

#include "format/chain.hpp"
#include "format/file_reader.hpp"
#include "format/naming.hpp"

namespace cairn::cli {
namespace {

// True when dir holds at least one committed Cairn file (<dir>/<name>/...).
bool HoldsCairnFiles(os::FileSystem* fs, const std::string& dir) {
  auto names = ListNames(fs, dir);
  if (!names.ok()) return false;
  for (const std::string& name : *names) {
    auto files = ListFiles(fs, dir, name);
    if (!files.ok()) continue;
    for (const StoreFile& f : *files) {
      if (!f.temp) return true;
    }
  }
  return false;
}

}  // namespace

void FindCairnDirs(os::FileSystem* fs, const std::string& dir, int levels,
                   std::vector<std::string>* out) {
  if (HoldsCairnFiles(fs, dir)) {
    out->push_back(dir);
    return;
  }
  if (levels == 0) return;
  auto entries = fs->List(dir);
  if (!entries.ok()) return;
  std::sort(entries->begin(), entries->end(),
            [](const os::DirEntry& a, const os::DirEntry& b) { return a.name < b.name; });
  for (const os::DirEntry& e : *entries) {
    if (e.is_dir && e.name[0] != '.') FindCairnDirs(fs, os::JoinPath(dir, e.name), levels - 1, out);
  }
}

Result<std::vector<std::string>> ListNames(os::FileSystem* fs, const std::string& dir) {
  CAIRN_ASSIGN_OR_RETURN(auto entries, fs->List(dir));
  std::vector<std::string> names;
  for (const os::DirEntry& e : entries) {
    if (e.is_dir && format::ValidateName(e.name).ok()) names.push_back(e.name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<std::vector<StoreFile>> ListFiles(os::FileSystem* fs, const std::string& dir,
                                         const std::string& name) {
  const std::string name_dir = os::JoinPath(dir, name);
  CAIRN_ASSIGN_OR_RETURN(auto entries, fs->List(name_dir));
  std::vector<StoreFile> files;
  for (const os::DirEntry& e : entries) {
    if (e.is_dir) continue;
    StoreFile f;
    f.name = name;
    f.path = os::JoinPath(name_dir, e.name);
    std::string_view committed = e.name;
    if (format::IsTempFileName(e.name, &f.pid)) {
      f.temp = true;
      committed = committed.substr(1, committed.rfind('.', committed.size() - 5) - 1);
    }
    auto parsed = format::ParseEntryFileName(committed);
    if (!parsed) continue;
    f.kind = parsed->kind;
    f.number = parsed->number;
    files.push_back(std::move(f));
  }
  std::sort(files.begin(), files.end(), [](const StoreFile& a, const StoreFile& b) {
    if (a.kind != b.kind) return a.kind < b.kind;
    if (a.number != b.number) return a.number < b.number;
    return a.temp < b.temp;
  });
  return files;
}

std::string Describe(const std::string& path, const Status& s) {
  if (s.message().rfind(path, 0) == 0) return s.message();
  if (s.message().find(path) != std::string::npos) return s.ToString();
  return path + ": " + s.ToString();
}

std::string Short(format::EntryKind kind, int64_t number) {
  std::string s(1, kind == format::EntryKind::kCheckpoint ? 'v' : 'h');
  s += std::to_string(number);
  return s;
}

std::string StripPath(const std::string& path, std::string what) {
  if (what.rfind(path + ": ", 0) == 0) what.erase(0, path.size() + 2);
  return what;
}

Status Verifier::Check(const std::string& dir, const StoreFile& f) {
  Status s = File(f.path);
  if (!s.ok()) return s;
  auto chain = format::Chain::Open(fs_, dir, f.name, f.number, f.kind);
  if (!chain.ok()) return chain.status();
  const auto& links = chain->links();
  for (size_t i = 1; i < links.size(); ++i) {
    Status ls = File(links[i]->path());
    if (ls.ok()) continue;
    return Status(ls.code(), f.path + ": " + Short(f.kind, links[i - 1]->info().number) +
                                 " -> base " + Short(f.kind, links[i]->info().number) + ": " +
                                 ls.message());
  }
  return Status::Ok();
}

Status Verifier::File(const std::string& path) {
  auto it = done_.find(path);
  if (it != done_.end()) return it->second;
  auto reader = format::FileReader::Open(fs_, path);
  Status s = reader.ok() ? (*reader)->VerifyAll() : reader.status();
  done_.emplace(path, s);
  return s;
}

}  // namespace cairn::cli
