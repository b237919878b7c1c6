// The mover: copies committed checkpoints from the local to the persistent
// tier (verifying every block on the way, so a damaged local file is never
// propagated), deletes files of consumed steps, and applies retention.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/pipeline.hpp"
#include "format/file_reader.hpp"
#include "format/file_writer.hpp"
#include "util/clock.hpp"

namespace cairn::core {

void Pipeline::EnqueueMover(std::function<void()> task) { mover_.Push(std::move(task)); }

namespace {

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

// Copies one committed file block by block, verifying each block's CRC.
Status CopyVerified(os::FileSystem* fs, const std::string& from, const tiers::FileTier& to,
                    uint32_t block_bytes) {
  CAIRN_ASSIGN_OR_RETURN(auto reader, format::FileReader::Open(fs, from));
  const auto& info = reader->info();
  CAIRN_RETURN_IF_ERROR(to.EnsureNameDir(info.name));
  CAIRN_ASSIGN_OR_RETURN(
      auto writer, format::FileWriter::Create(fs, to.EntryPath(info.name, info.kind, info.number), info,
                                              reader->layout(), to.writer_options()));
  std::unique_ptr<uint8_t, AlignedFree> buffer(
      static_cast<uint8_t*>(std::aligned_alloc(format::kAlignment, format::AlignUp(block_bytes))));
  if (!buffer) return Status::NoMemory("bounce buffer for the persistent copy");
  for (uint32_t b = 0; b < reader->layout().blocks.size(); ++b) {
    uint32_t length = reader->layout().blocks[b].length;
    std::memset(buffer.get() + length, 0, format::AlignUp(length) - length);
    CAIRN_RETURN_IF_ERROR(reader->ReadBlock(b, buffer.get(), /*verify=*/true));
    CAIRN_RETURN_IF_ERROR(writer->WriteBlock(b, buffer.get(), reader->block_crc(b)));
  }
  return writer->Commit();
}

}  // namespace

void Pipeline::PersistEntry(const EntryPtr& e) {
  auto t0 = std::chrono::steady_clock::now();
  const std::string from = local_.EntryPath(e->name, e->kind, e->number);
  Status s = CopyVerified(fs_, from, *persistent_, static_cast<uint32_t>(config_.block_bytes));
  double seconds = SecondsSince(t0);
  {
    MutexLock lock(&mu_);
    e->persist_pending = false;
    if (s.ok()) {
      tracer_.Span("persist", "persistent", t0, std::chrono::steady_clock::now(),
                   e->layout.payload_bytes, e->name, e->number);
      e->persistent_committed = true;
      stats_.flush_persistent.bytes += e->layout.payload_bytes;
      stats_.flush_persistent.ops += 1;
      stats_.flush_persistent.seconds += seconds;
    } else {
      e->persistent_error = s.WithContext("copy of '" + e->name + "' " + std::to_string(e->number) +
                                          " to the persistent tier");
      ++stats_.failed_flushes;
      if (unreported_error_.ok()) unreported_error_ = e->persistent_error;
    }
    cv_app_.notify_all();
  }
  ApplyRetention(e->name);
}

// Keeps the newest keep_versions committed versions of `name` in each tier.
// Runs on the mover thread. A local file still waiting for its persistent
// copy is kept; the next retention pass removes it.
void Pipeline::ApplyRetention(const std::string& name) {
  const auto kind = format::EntryKind::kCheckpoint;
  const size_t keep = static_cast<size_t>(config_.keep_versions);
  std::vector<const tiers::FileTier*> tiers{&local_};
  if (persistent_) tiers.push_back(&*persistent_);
  for (const tiers::FileTier* tier : tiers) {
    auto versions = tier->ListCommitted(name, kind);
    if (!versions.ok() || versions->size() <= keep) continue;
    std::vector<int64_t> doomed(versions->begin(), versions->end() - static_cast<ptrdiff_t>(keep));
    for (int64_t v : doomed) {
      {
        MutexLock lock(&mu_);
        EntryPtr e = catalog_.Find(kind, name, v);
        if (e && (e->persist_pending || !e->local_committed)) continue;
        // Older than the newest `keep` committed ones: forget it everywhere.
        if (e && tier == &local_) Consume(e);
      }
      (void)tier->RemoveEntry(name, kind, v);
    }
  }
}

}  // namespace cairn::core
