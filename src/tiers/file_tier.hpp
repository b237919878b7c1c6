// A file tier: a directory holding committed data files (the local scratch
// directory, or the shared persistent directory). Knows where an entry's file
// lives, which versions are committed and how to remove them. Stateless apart
// from its settings, so it is safe to use from any thread.
//
// The tier interface of the pipeline is deliberately small: the host cache is
// the only memory tier in this build; a GPU device tier sits in front of it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/cairn.hpp"
#include "format/file_writer.hpp"
#include "format/layout.hpp"
#include "os/fs/fs.hpp"

namespace cairn::tiers {

class FileTier {
 public:
  FileTier(Level level, std::string dir, os::FileSystem* fs, format::WriterOptions options)
      : level_(level), dir_(std::move(dir)), fs_(fs), options_(options) {}

  Level level() const { return level_; }
  const std::string& dir() const { return dir_; }
  os::FileSystem* fs() const { return fs_; }
  const format::WriterOptions& writer_options() const { return options_; }

  std::string NameDir(std::string_view name) const;
  std::string EntryPath(std::string_view name, format::EntryKind kind, int64_t number) const;
  // mkdir -p <dir> (mode 0700). With fsync on, the parent of every directory
  // it created, and the parent of <dir>, are fsynced: a new directory's
  // entry survives a power loss only once its parent is synced.
  Status EnsureDir() const;
  // mkdir -p <dir>/<name> (mode 0700), then (fsync on) fsyncs <dir>: the
  // files committed into <name> are lost with it if its entry is. Synced
  // also when <name> existed: a crash may have come between mkdir and fsync.
  Status EnsureNameDir(std::string_view name) const;
  // Committed entries of `kind` under <dir>/<name>, ascending. Missing
  // directory = empty list.
  Result<std::vector<int64_t>> ListCommitted(std::string_view name, format::EntryKind kind) const;
  bool Exists(std::string_view name, format::EntryKind kind, int64_t number) const;
  // Removes a committed file; absent is not an error.
  Status RemoveEntry(std::string_view name, format::EntryKind kind, int64_t number) const;

 private:
  Level level_;
  std::string dir_;
  os::FileSystem* fs_;
  format::WriterOptions options_;
};

}  // namespace cairn::tiers
