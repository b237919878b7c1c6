#include "engine/stages/prefetcher.hpp"

#include <utility>

#include "format/file_reader.hpp"

namespace cairn::core {

Prefetcher::Prefetcher(Mutex* mu, std::condition_variable_any* done, int depth, BlockStore* store,
                       MemoryMovers* movers, const tiers::FileTier* steps, Owner* owner)
    : mu_(mu),
      done_(done),
      depth_(depth),
      store_(store),
      movers_(movers),
      steps_(steps),
      owner_(owner),
      worker_(mu, done, this) {}

std::optional<EntryPtr> Prefetcher::TakeJob(Worker<EntryPtr, Prefetcher>&) {
  mu_->AssertHeld();  // the Worker takes jobs with *mu held
  if (EntryPtr e = FindTarget()) return e;
  return std::nullopt;
}

void Prefetcher::RunJob(EntryPtr& e) {
  mu_->AssertHeld();  // the Worker runs jobs with *mu held
  LoadStep(e);
}

EntryPtr Prefetcher::FindTarget() {
  return WalkPoppedSteps(owner_->catalog(), depth_, [this](const Entry& e) {
    mu_->AssertHeld();  // the walk runs under *mu, which clang cannot see here
    return Judge(e);
  });
}

StepVerdict Prefetcher::Judge(const Entry& e) const {
  // Being loaded already (by us or by a pop reading its file), or not yet
  // captured: counts towards the depth, needs no read.
  if (e.fully_cached() || e.reads().prefetching || e.reads().pop_reading || !e.capture().done)
    return StepVerdict::kAhead;
  if (e.reads().prefetch_failed || e.failed()) return StepVerdict::kSkip;
  // Still being written: the pop will wait for it.
  if (!e.local().committed) return StepVerdict::kNextHistory;
  if (e.blocks().size() > store_->chunk_count())
    return StepVerdict::kSkip;  // larger than the cache
  // Enough room without evicting anything needed sooner (this entry's own
  // resident blocks included)? Else wait for pops to free space.
  const size_t missing = e.blocks().size() - e.capture().resident_blocks;
  return store_->HasRoomFor(e, missing) ? StepVerdict::kTake : StepVerdict::kWait;
}

void Prefetcher::LoadStep(const EntryPtr& e) {
  const auto t0 = std::chrono::steady_clock::now();
  store_->PrefetchStarted(*e);
  // Pinned while the lock is dropped (entry.hpp): a pop that is reading
  // this step from its file may consume it meanwhile, and must leave the
  // chunks we are filling to our unpin (it released them under us, and the
  // failed read then freed chunk -1).
  store_->Pin(*e);
  std::vector<uint8_t*> dst;
  std::vector<uint32_t> crcs;
  Status s;
  if (TakeChunks(*e, &dst)) {
    const MemoryMovers::Scope moving(movers_, MemoryMovers::Kind::kBackgroundIo);
    s = ReadBlocks(e, dst, &crcs);
  } else {
    s = Status::Io("no chunk for prefetching '" + e->name + "' step " + std::to_string(e->number));
  }
  store_->PrefetchEnded(*e, s.ok());
  if (s.ok()) {
    Publish(*e, dst, crcs);
    owner_->Loaded(e, t0);
  } else {
    // The pop reads the file itself and reports the damage.
    GiveBack(*e, dst);
  }
  owner_->Unpin(e);  // releases the chunks if the step was consumed meanwhile
  done_->notify_all();
  owner_->Finished();
}

bool Prefetcher::TakeChunks(Entry& e, std::vector<uint8_t*>* dst) {
  // Only blocks without a chunk are read; resident ones stay (prefetching
  // keeps them from being evicted meanwhile).
  dst->assign(e.blocks().size(), nullptr);
  for (uint32_t b = 0; b < e.blocks().size(); ++b) {
    if (e.blocks()[b].chunk >= 0 && e.blocks()[b].sealed) continue;
    // FindTarget counted the room under this same lock, so this finds one.
    auto chunk = owner_->AcquireChunk(e, e.layout.blocks[b].length);
    if (!chunk) {
      GiveBack(e, *dst);
      dst->assign(e.blocks().size(), nullptr);
      return false;
    }
    store_->Place(e, b, *chunk);
    (*dst)[b] = store_->data(*chunk);
  }
  return true;
}

Status Prefetcher::ReadBlocks(const EntryPtr& e, const std::vector<uint8_t*>& dst,
                              std::vector<uint32_t>* crcs) {
  const tiers::FileTier& tier = *steps_;
  const std::string path = tier.EntryPath(e->name, e->kind, e->number);
  const size_t nblocks = e->blocks().size();
  MutexUnlock unlocked(mu_);  // the file read
  auto reader = format::FileReader::Open(tier.fs(), path);
  Status s = reader.status();
  for (uint32_t b = 0; s.ok() && b < nblocks; ++b) {
    if (dst[b]) {
      follower_.Follow(dst[b]);
      s = (*reader)->ReadBlock(b, dst[b], /*verify=*/true);
    }
  }
  if (s.ok()) {
    crcs->resize(nblocks);
    for (uint32_t b = 0; b < nblocks; ++b) (*crcs)[b] = (*reader)->block_crc(b);
  }
  return s;
}

void Prefetcher::Publish(Entry& e, const std::vector<uint8_t*>& dst,
                         const std::vector<uint32_t>& crcs) {
  for (uint32_t b = 0; b < e.blocks().size(); ++b) {
    if (!dst[b]) continue;
    store_->Loaded(e, b, crcs[b]);
  }
  store_->AllResident(e);
}

void Prefetcher::GiveBack(Entry& e, const std::vector<uint8_t*>& dst) {
  for (uint32_t b = 0; b < dst.size(); ++b) {
    if (!dst[b]) continue;
    store_->Unplace(e, b);
  }
}

}  // namespace cairn::core
