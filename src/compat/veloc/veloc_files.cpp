// VELOC's file API over Cairn (docs/veloc.md, "Files"). As VELOC 1.8 does,
// VELOC_Route_file gives one path per checkpoint and process, whatever the
// original name: <scratch>/<name>-<id>-<version>.dat (id: the rank, or
// VELOC_Init_single's id); the last original routed is recorded.
//   - checkpoint: the application writes the file there; VELOC_Checkpoint_end
//     reads it whole into memory and captures it as a region of the version
//     (so the file and the memory regions commit together, checksummed,
//     copied to the persistent directory and kept or deleted as one), then
//     removes it;
//   - restart: VELOC_Restart_begin restores the version's file there,
//     VELOC_Route_file names it, VELOC_Restart_end removes it.
// A version that an earlier libcairn_veloc wrote with several routed files
// restores them as it wrote them: each under its escaped original in
// <scratch>/veloc-files/<rank>/<name>.<version>/, routed by original.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "compat/veloc/veloc_shim.hpp"
#include "veloc/defs.h"

namespace cairn::veloc {
namespace {

// A path as one file name: '%' and '/' escaped, so that distinct paths stay
// distinct.
std::string Escape(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == '%') out += "%25";
    else if (c == '/') out += "%2F";
    else out += c;
  }
  return out;
}

Result<std::vector<uint8_t>> ReadWhole(const std::string& path, const std::string& original) {
  std::FILE* f = std::fopen(path.c_str(), "rbe");
  if (f == nullptr) {
    return Status::NotFound("routed file '" + path + "' (for '" + original + "') cannot be read: " + std::strerror(errno));
  }
  std::vector<uint8_t> data;
  uint8_t buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) data.insert(data.end(), buf, buf + n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return Status::Io("reading routed file '" + path + "' failed");
  return data;
}

Status WriteWhole(const std::string& path, const std::vector<uint8_t>& data) {
  std::FILE* f = std::fopen(path.c_str(), "wbe");
  if (f == nullptr) return Status::Io("cannot create '" + path + "': " + std::strerror(errno));
  const bool wrote = data.empty() || std::fwrite(data.data(), 1, data.size(), f) == data.size();
  const bool closed = std::fclose(f) == 0;
  if (!wrote || !closed) return Status::Io("writing '" + path + "' failed: " + std::strerror(errno));
  return Status::Ok();
}

uint8_t g_empty_file;  // where an empty file's (zero-byte) region points

}  // namespace

std::string Shim::PhaseDir() const {
  return scratch_root_ + "/veloc-files/" + tag_ + "/" + name_ + "." + std::to_string(version_);
}

std::string Shim::RoutedPath() const {
  return scratch_root_ + "/" + name_ + "-" + std::to_string(unique_id_) + "-" + std::to_string(version_) + ".dat";
}

size_t Shim::FileEntries() const {
  return static_cast<size_t>(
      std::count_if(table_.begin(), table_.end(), [](const TableEntry& e) { return e.kind == TableEntry::kFile; }));
}

void Shim::RemovePhaseFiles() {
  std::error_code ec;  // best effort: a leftover file is only space
  std::filesystem::remove(RoutedPath(), ec);
  std::filesystem::remove_all(PhaseDir(), ec);
}

Result<std::string> Shim::RouteFile(const char* original) {
  if (phase_ == Phase::kNone) {
    return Status::State("VELOC_Route_file: only within a checkpoint or restart phase (VELOC_Checkpoint_begin / VELOC_Restart_begin)");
  }
  if (original == nullptr || *original == '\0') return Status::InvalidArgument("VELOC_Route_file: the file name is NULL or empty");
  std::string path = original;
  if (path[0] != '/') {  // as VELOC: relative to the working directory at the call
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd) == nullptr) return Status::Io(std::string("getcwd failed: ") + std::strerror(errno));
    path = std::string(cwd) + "/" + path;
  }
  const bool several = phase_ == Phase::kRestart && FileEntries() > 1;  // an earlier libcairn_veloc's
  const std::string routed = several ? PhaseDir() + "/" + Escape(path) : RoutedPath();
  if (routed.size() >= VELOC_MAX_NAME) {
    return Status::InvalidArgument("VELOC_Route_file: the routed path for '" + path + "' has " + std::to_string(routed.size()) +
                                   " characters, VELOC_MAX_NAME is " + std::to_string(VELOC_MAX_NAME));
  }
  if (phase_ == Phase::kRestart) {
    for (const TableEntry& e : table_) {
      if (e.kind == TableEntry::kFile && (!several || e.file == path)) return routed;
    }
    return Status::NotFound("version " + std::to_string(version_) + " of '" + name_ + "' holds no file" +
                            (several ? " '" + path + "'" : " (nothing was routed in its checkpoint)"));
  }
  std::error_code ec;
  std::filesystem::create_directories(scratch_root_, ec);
  if (ec) return Status::Io("cannot create '" + scratch_root_ + "': " + ec.message());
  files_.assign(1, path);  // as VELOC: one file per checkpoint, the last original recorded
  return routed;
}

Status Shim::CaptureFiles(std::map<int, Region>* want) {
  file_data_.clear();
  file_data_.reserve(files_.size());  // the regions point into these vectors
  for (size_t k = 0; k < files_.size(); ++k) {
    CAIRN_ASSIGN_OR_RETURN(std::vector<uint8_t> data, ReadWhole(RoutedPath(), files_[k]));
    file_data_.push_back(std::move(data));
    const std::vector<uint8_t>& d = file_data_.back();
    const int id = kFirstFile + static_cast<int>(k);
    (*want)[id] = {d.empty() ? &g_empty_file : const_cast<uint8_t*>(d.data()), d.size()};
    table_.push_back({id, TableEntry::kFile, d.size(), files_[k]});
  }
  return Status::Ok();
}

Status Shim::MaterializeFiles() {
  // Every rank restores once more, with or without files: the restore is
  // collective. The header makes the set of regions non-empty.
  std::map<int, Region> want = {{kMetaHeader, {header_, sizeof header_}}};
  file_data_.clear();
  file_data_.reserve(table_.size());
  for (const TableEntry& e : table_) {
    if (e.kind != TableEntry::kFile) continue;
    file_data_.emplace_back(e.bytes);
    std::vector<uint8_t>& d = file_data_.back();
    want[e.id] = {d.empty() ? &g_empty_file : d.data(), d.size()};
  }
  CAIRN_RETURN_IF_ERROR(Register(want));
  Status s = client_->Restore(name_, cairn_version_);
  if (s.ok() && !file_data_.empty()) {
    const bool several = file_data_.size() > 1;
    const std::string dir = several ? PhaseDir() : scratch_root_;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) s = Status::Io("cannot create '" + dir + "': " + ec.message());
    size_t k = 0;
    for (const TableEntry& e : table_) {
      if (!s.ok()) break;
      if (e.kind != TableEntry::kFile) continue;
      s = WriteWhole(several ? PhaseDir() + "/" + Escape(e.file) : RoutedPath(), file_data_[k++]);
    }
  }
  if (Status d = DropFileRegions(); s.ok()) s = d;
  file_data_.clear();
  return s;
}

}  // namespace cairn::veloc
