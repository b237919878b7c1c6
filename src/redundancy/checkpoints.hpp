// What the redundancy levels ask of a member's own checkpoints (its client's
// pipeline): whether and when a version is committed locally or
// persistently, which versions check out, and the two things the global
// commit hands back (its record in the manifests, and what retention must
// keep). The client implements it (client_group.cpp, over its Pipeline); the
// redundancy tests implement it with fakes. Keeps the redundancy code free of
// the engine: Levels, partner::Transfers, parity::BackgroundEncoder and
// collective::GlobalCommit see a member's checkpoints only through this.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "cairn/status.hpp"
#include "util/extent.hpp"

namespace cairn::redundancy {

class Checkpoints {
 public:
  // A local commit: the version and when it completed (CLOCK_REALTIME, ns
  // since the epoch); {-1, -1}: none.
  struct Commit {
    int64_t version = -1;
    int64_t realtime_ns = -1;
  };

  // The newest version of `name` committed in the member's local directory.
  // No I/O, never blocks (the background threads ask it often).
  virtual Commit NewestLocal(const std::string& name) = 0;
  // Blocks until `version` of `name` is committed locally; the error when it
  // never will be.
  virtual Status WaitLocal(const std::string& name, int64_t version) = 0;
  // Blocks until it is committed in the persistent tier (L4).
  virtual Status WaitPersistent(const std::string& name, int64_t version) = 0;
  // The committed versions of `name` whose structure checks out, newest first.
  virtual Result<std::vector<int64_t>> IntactVersions(const std::string& name) = 0;
  // Records the global commit of `name` in the manifests (`persistent`: the
  // version is persistent too, else -1), agreed across members. Collective.
  virtual Status RecordGlobal(const std::string& name, int64_t committed, int64_t persistent) = 0;
  // Retention of `name` learns the newest recorded global commit and the
  // newest version that may be common to every member (docs/mpi.md,
  // "Retention"). Values only rise.
  virtual void KeepGlobal(const std::string& name, int64_t global, int64_t common) = 0;
  // Copies into `dst` what the member's host cache holds of bytes [offset,
  // offset + bytes) of the local file of version `number` of `name`
  // (captured; committed or on its way), and returns the sub-ranges it did
  // not fill, in order, for the caller to read from the file once it is
  // committed. No I/O, never blocks for long. Without a host cache (this
  // default) it fills nothing.
  virtual ExtentList CopyCached(const std::string& name, int64_t number, uint64_t offset,
                                uint64_t bytes, uint8_t* dst) {
    (void)name, (void)number, (void)dst;
    return {{offset, bytes}};
  }
  // Before its local commit: the size of the one file that `version` of
  // `name` will have, when it is captured whole as a full version (no base
  // to send with it); kNotFound otherwise, and in this default. No I/O.
  virtual Result<uint64_t> PlannedFileBytes(const std::string& name, int64_t version) {
    (void)name;
    return Status::NotFound("version " + std::to_string(version) + ": no plan of its file");
  }
  // Whether `version` of `name` is committed locally (true) or still on its
  // way (false); the error when its local commit failed. No I/O, never
  // blocks. This default knows no failures.
  virtual Result<bool> CommittedLocally(const std::string& name, int64_t version) {
    return NewestLocal(name).version >= version;
  }
  // Back-pressure (docs/mpi.md, "Back-pressure"): whether the member's
  // application is inside a capture or a restore (copying, or waiting for
  // cache room or for a read), which the levels' background I/O yields to.
  // No I/O, never blocks.
  virtual bool ApplicationBusy() = 0;
  // Returns once ApplicationBusy() is false, or after `at_most`.
  virtual void AwaitApplicationIdle(std::chrono::milliseconds at_most) = 0;

 protected:
  ~Checkpoints() = default;
};

}  // namespace cairn::redundancy
