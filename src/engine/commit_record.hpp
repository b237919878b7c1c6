// The commits a pipeline has seen, per checkpoint name: the newest version
// committed to the local directory and when (the global commit in the
// background asks for it at every Cairn call, docs/mpi.md), and in an MPI
// job the newest version known to be committed on every rank (`global`) and
// the newest that may be (`common`), which retention keeps (docs/mpi.md,
// "Retention"). Every value only rises.
//
// Not thread-safe: its owner's mutex guards it (Pipeline::mu_).
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace cairn::core {

class CommitRecord {
 public:
  struct Local {
    int64_t version = -1;
    int64_t realtime_ns = -1;  // CLOCK_REALTIME, ns since the epoch
  };

  // Version v of `name` is committed locally, at realtime_ns; an older one
  // than the newest recorded changes nothing.
  void NoteLocal(const std::string& name, int64_t v, int64_t realtime_ns);
  // {-1, -1} when none since open.
  Local NewestLocal(const std::string& name) const;

  // Raises `name`'s global and common commits to these (a lower value
  // changes nothing); true when `global` rose.
  bool RaiseGlobal(const std::string& name, int64_t global, int64_t common);
  // -1 when none recorded (or not in a job).
  int64_t Global(const std::string& name) const;
  int64_t Common(const std::string& name) const;

 private:
  struct Job {
    int64_t global = -1, common = -1;
  };
  std::map<std::string, Local> local_;
  std::map<std::string, Job> job_;
};

}  // namespace cairn::core
