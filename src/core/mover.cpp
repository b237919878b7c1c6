#include "core/mover.hpp"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "format/file_reader.hpp"
#include "format/file_writer.hpp"
#include "util/clock.hpp"

namespace cairn::core {

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

Mover::Mover(Mutex* mu, std::condition_variable_any* done, const tiers::FileTier* local,
             const tiers::FileTier* persistent, uint32_t block_bytes, size_t keep, Owner owner)
    : mu_(mu),
      local_(local),
      persistent_(persistent),
      block_bytes_(block_bytes),
      keep_(keep),
      owner_(std::move(owner)),
      worker_(mu, done, {.run = [this](Chore& chore) {
                mu_->AssertHeld();  // the Worker runs jobs with *mu held
                MutexUnlock unlocked(mu_);  // every chore does its own I/O and locking
                chore();
              }}) {}

void Mover::Copy(const EntryPtr& e) {
  worker_.Push([this, e] {
    CopyEntry(e);
    ApplyRetention(e->name);
  });
}

void Mover::Retain(const std::string& name) {
  worker_.Push([this, name] { ApplyRetention(name); });
}

void Mover::Remove(const tiers::FileTier* tier, const std::string& name, format::EntryKind kind,
                   int64_t number) {
  worker_.Push([tier, name, kind, number] { (void)tier->RemoveEntry(name, kind, number); });
}

void Mover::Run(std::function<void()> chore) { worker_.Push(std::move(chore)); }

// name, kind and number of an entry never change once it is captured: read
// without the lock.
void Mover::CopyEntry(const EntryPtr& e) {
  const auto t0 = std::chrono::steady_clock::now();
  Status s = CopyVerified(local_->fs(), local_->EntryPath(e->name, e->kind, e->number), *persistent_,
                          block_bytes_);
  const double seconds = SecondsSince(t0);
  if (!s.ok()) {
    s = s.WithContext("copy of '" + e->name + "' " + std::to_string(e->number) + " to the persistent tier");
  }
  MutexLock lock(mu_);
  owner_.copied(e, s, t0, seconds);
}

// A local file still needed (not yet persisted) is kept; a later pass
// removes it.
void Mover::ApplyRetention(const std::string& name) {
  const auto kind = format::EntryKind::kCheckpoint;
  std::vector<const tiers::FileTier*> tiers{local_};
  if (persistent_) tiers.push_back(persistent_);
  for (const tiers::FileTier* tier : tiers) {
    auto versions = tier->ListCommitted(name, kind);
    if (!versions.ok() || versions->size() <= keep_) continue;
    std::vector<int64_t> doomed(versions->begin(), versions->end() - static_cast<ptrdiff_t>(keep_));
    for (int64_t v : doomed) {
      {
        MutexLock lock(mu_);
        if (!owner_.may_retire(name, v, tier == local_)) continue;
      }
      (void)tier->RemoveEntry(name, kind, v);
    }
  }
}

}  // namespace cairn::core
