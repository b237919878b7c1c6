// A member's checkpoints for the redundancy tests (redundancy/checkpoints.hpp):
// each answer is a hook the test sets, with a default that says "nothing
// here": no commit, waits that fail, no intact version, records and
// retention accepted, no host cache (nothing sent before a local commit),
// an application that is never busy.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "redundancy/checkpoints.hpp"

namespace cairn::test {

class FakeCheckpoints final : public redundancy::Checkpoints {
 public:
  std::function<Commit(const std::string&)> newest_local;
  std::function<Status(const std::string&, int64_t)> wait_local;
  std::function<Status(const std::string&, int64_t)> wait_persistent;
  std::function<Status(const std::string&, int64_t, int64_t)> record_global;
  std::function<ExtentList(const std::string&, int64_t, uint64_t, uint64_t, uint8_t*)> copy_cached;
  std::function<Result<uint64_t>(const std::string&, int64_t)> planned_file_bytes;
  std::function<Result<bool>(const std::string&, int64_t)> committed_locally;
  std::function<std::vector<int64_t>(const std::string&)> intact_versions;
  std::atomic<bool> busy{false};     // ApplicationBusy
  std::function<void()> await_idle;  // AwaitApplicationIdle (default: returns at once)

  Commit NewestLocal(const std::string& name) override {
    return newest_local ? newest_local(name) : Commit{};
  }
  Status WaitLocal(const std::string& name, int64_t version) override {
    return wait_local ? wait_local(name, version) : Status::NotFound("never committed");
  }
  Status WaitPersistent(const std::string& name, int64_t version) override {
    return wait_persistent ? wait_persistent(name, version) : Status::NotFound("never persistent");
  }
  Result<std::vector<int64_t>> IntactVersions(const std::string& name) override {
    return intact_versions ? intact_versions(name) : std::vector<int64_t>{};
  }
  Status RecordGlobal(const std::string& name, int64_t committed, int64_t persistent) override {
    return record_global ? record_global(name, committed, persistent) : Status::Ok();
  }
  void KeepGlobal(const std::string&, int64_t, int64_t) override {}
  ExtentList CopyCached(const std::string& name, int64_t number, uint64_t offset, uint64_t bytes,
                        uint8_t* dst) override {
    if (copy_cached) return copy_cached(name, number, offset, bytes, dst);
    return Checkpoints::CopyCached(name, number, offset, bytes, dst);
  }
  Result<uint64_t> PlannedFileBytes(const std::string& name, int64_t version) override {
    if (planned_file_bytes) return planned_file_bytes(name, version);
    return Checkpoints::PlannedFileBytes(name, version);
  }
  Result<bool> CommittedLocally(const std::string& name, int64_t version) override {
    if (committed_locally) return committed_locally(name, version);
    return Checkpoints::CommittedLocally(name, version);
  }
  bool ApplicationBusy() override { return busy.load(); }
  void AwaitApplicationIdle(std::chrono::milliseconds) override {
    if (await_idle) await_idle();
  }
};

}  // namespace cairn::test
