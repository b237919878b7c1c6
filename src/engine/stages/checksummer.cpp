#include "engine/stages/checksummer.hpp"

#include <utility>

#include "util/crc32c.hpp"

namespace cairn::core {

Checksummer::Checksummer(Mutex* mu, std::condition_variable_any* done, Owner* owner)
    : mu_(mu), owner_(owner), worker_(mu, done, this) {}

std::optional<Checksummer::Job> Checksummer::TakeJob(Worker<Job, Checksummer>& w) {
  mu_->AssertHeld();  // the Worker takes jobs with *mu held
  if (owner_->Paused()) return std::nullopt;
  return w.PopFront();
}

void Checksummer::RunJob(Job& j) {
  mu_->AssertHeld();  // the Worker runs jobs with *mu held
  ChecksumBlock(j.e, j.block);
}

void Checksummer::ChecksumBlock(const EntryPtr& e, uint32_t block) {
  const BlockState& bs = e->blocks()[block];
  if (e->consumed() || bs.chunk < 0) return;
  owner_->Pin(e);
  const uint8_t* data = owner_->ChunkData(static_cast<uint32_t>(bs.chunk));
  const uint32_t length = e->layout.blocks[block].length;
  uint32_t crc = 0;
  {
    MutexUnlock unlocked(mu_);  // the CRC32C of the pinned chunk
    crc = crc32c::Value(data, length);
  }
  owner_->Checksummed(e, block, crc);  // before the unpin (see Owner)
  owner_->Unpin(e);
}

}  // namespace cairn::core
