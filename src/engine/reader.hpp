// How the pipeline reads versions back, for Restore, RestoreLatest, Latest,
// Pop and Wait: from the host or device cache when the entry is resident
// (CopyFromCache), else from the committed files, chain by chain, each link
// verified as it is read (ReadFromFiles, ReadChain); which versions exist
// and which check out structurally (CommittedVersions, Intact).
//
// A Reader holds no state of its own: it is the pipeline's read steps over
// the pipeline's state (nested in Pipeline, it reaches it as the pipeline's
// own members do), made for each call that reads. Internal to the engine:
// restore.cpp, chain_restore.cpp and history.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "engine/pipeline.hpp"
#include "util/thread_annotations.hpp"

namespace cairn::format {
class Chain;
}  // namespace cairn::format

namespace cairn::core {

class Pipeline::Reader {
 public:
  explicit Reader(Pipeline* p) : p_(p) {}

  // Pipeline::Restore and Pipeline::Pop (pipeline.hpp says what they promise).
  Status Restore(const std::string& name, int64_t version,
                 const std::vector<RestoreTarget>& targets, FileRead read) CAIRN_EXCLUDES(p_->mu_);
  Result<size_t> Pop(const std::string& name, int64_t step, void* dst, size_t capacity,
                     MemoryKind dst_kind) CAIRN_EXCLUDES(p_->mu_);

  // Wait() for an entry no longer (or never) in this pipeline: the committed
  // files answer (no lock held: it stats files).
  Status WaitForFiles(format::EntryKind kind, const std::string& name, int64_t number, Level level)
      CAIRN_EXCLUDES(p_->mu_);
  // Committed checkpoint versions of `name` in the local and persistent tiers.
  Result<std::set<int64_t>> CommittedVersions(const std::string& name);
  // The version's chain (or its cache entry) checks out structurally in
  // some tier; else appends why to *damaged (chain_restore.cpp).
  bool Intact(const std::string& name, int64_t version, std::string* damaged)
      CAIRN_EXCLUDES(p_->mu_);

 private:
  // One verifying pass per link of an opened chain of `tier` into targets.
  Status ReadChain(const format::Chain& chain, const tiers::FileTier& tier,
                   const std::string& label, const std::vector<RestoreTarget>& targets,
                   FileRead read) CAIRN_EXCLUDES(p_->mu_);
  // Precondition: e is pinned and fully cached. Drops mu_ for the copies.
  // *device_hit: some block came from the device cache.
  Status CopyFromCache(const EntryPtr& e, const std::vector<RestoreTarget>& targets,
                       bool* device_hit) CAIRN_REQUIRES(p_->mu_);
  // From the files, chain by chain (chain_restore.cpp): the local tier's
  // chain, else the persistent tier's.
  Status ReadFromFiles(format::EntryKind kind, const std::string& name, int64_t number,
                       const std::vector<RestoreTarget>& targets,
                       FileRead read = FileRead::kAsWritten) CAIRN_EXCLUDES(p_->mu_);
  // Counts a served restore or pop in the stats and the trace.
  void NoteRead(bool hit, uint64_t bytes, std::chrono::steady_clock::time_point t0,
                const char* span, const std::string& name, int64_t number) CAIRN_REQUIRES(p_->mu_);

  Pipeline* const p_;
};

}  // namespace cairn::core
