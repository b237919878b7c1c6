// The pipeline as each stage's Owner: the interfaces the stages declare
// (stages/*.hpp, "What it needs of its owner") implemented over the
// pipeline's state, one class per stage, so that following what a stage's
// event does means reading one method in stage_owners.cpp (persistence.cpp
// for the persister's and the mover's). The flusher and the persister are
// both Flushers; what follows their commits differs.
//
// Each method is called by its stage with the pipeline's mu_ held and says
// so (CAIRN_REQUIRES), so the analysis checks what it reaches of the
// pipeline. Nested in Pipeline (Pipeline::StageOwners), they reach its
// private state as its own members do. Internal to the engine: only
// pipeline.cpp makes them.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "engine/pipeline.hpp"
#include "util/thread_annotations.hpp"

namespace cairn::core {

struct Pipeline::StageOwners {
  // Reads chunks from the store, wakes the writers, pauses while a capture
  // copies (capture precedence).
  class ChecksummerOwner final : public Checksummer::Owner {
   public:
    explicit ChecksummerOwner(Pipeline* p) : p_(p) {}
    void Pin(const EntryPtr& e) override CAIRN_REQUIRES(p_->mu_) { p_->store_.Pin(*e); }
    const uint8_t* ChunkData(uint32_t chunk) override CAIRN_REQUIRES(p_->mu_);
    void Unpin(const EntryPtr& e) override CAIRN_REQUIRES(p_->mu_);
    void Checksummed(const EntryPtr& e, uint32_t b, uint32_t crc) override CAIRN_REQUIRES(p_->mu_);
    bool Paused() override CAIRN_REQUIRES(p_->mu_);

   private:
    Pipeline* const p_;
  };

  // The local tier's flusher: a commit is booked and handed on
  // (Committed); after every entry, Flushed.
  class FlusherOwner : public Flusher::Owner {
   public:
    explicit FlusherOwner(Pipeline* p) : p_(p) {}
    void Unpin(const EntryPtr& e) override CAIRN_REQUIRES(p_->mu_);
    void Fail(const EntryPtr& e, const Status& s) override CAIRN_REQUIRES(p_->mu_);
    void Skipped() override CAIRN_REQUIRES(p_->mu_);
    void Committed(const EntryPtr& e, Flusher::TimePoint flush_start, double io_seconds) override
        CAIRN_REQUIRES(p_->mu_);
    void Flushed(const EntryPtr& e) override CAIRN_REQUIRES(p_->mu_);

   protected:
    Pipeline* const p_;
  };

  // The persistent tier's flusher (persistence.cpp): the same cache and pins;
  // its outcome is the version's persistence (NotePersisted), and a
  // skipped entry is counted once, by the flusher.
  class PersisterOwner final : public FlusherOwner {
   public:
    using FlusherOwner::FlusherOwner;
    void Fail(const EntryPtr& e, const Status& s) override CAIRN_REQUIRES(p_->mu_);
    void Skipped() override {}
    void Committed(const EntryPtr& e, Flusher::TimePoint flush_start, double io_seconds) override
        CAIRN_REQUIRES(p_->mu_);
    void Flushed(const EntryPtr& e) override CAIRN_REQUIRES(p_->mu_);
  };

  // A file copy to the persistent tier is booked as the persister's commits
  // are; retention asks MayRetire.
  class MoverOwner final : public Mover::Owner {
   public:
    explicit MoverOwner(Pipeline* p) : p_(p) {}
    void Copied(const EntryPtr& e, const Status& s, Mover::TimePoint t0, double seconds) override
        CAIRN_REQUIRES(p_->mu_);
    bool MayRetire(const std::string& name, int64_t v, bool local) override CAIRN_REQUIRES(p_->mu_);
    void RemoveNameDir(const std::string& name) override CAIRN_REQUIRES(p_->mu_) {
      p_->RemoveNameDirIfUnused(name);
    }

   private:
    Pipeline* const p_;
  };

  // History steps read ahead into chunks that evict only older captures.
  class PrefetcherOwner final : public Prefetcher::Owner {
   public:
    explicit PrefetcherOwner(Pipeline* p) : p_(p) {}
    const Catalog& catalog() override CAIRN_REQUIRES(p_->mu_);
    std::optional<uint32_t> AcquireChunk(const Entry& e, uint32_t write_bytes) override
        CAIRN_REQUIRES(p_->mu_);
    void Unpin(const EntryPtr& e) override CAIRN_REQUIRES(p_->mu_);
    void Loaded(const EntryPtr& e, Prefetcher::TimePoint t0) override CAIRN_REQUIRES(p_->mu_);
    void Finished() override CAIRN_REQUIRES(p_->mu_);

   private:
    Pipeline* const p_;
  };

  // Drains into host chunks (taking back the persister's room if need be),
  // counts device traffic, and makes a capture's wait for a slot the
  // application's blocking.
  class DeviceMoverOwner final : public DeviceMover::Owner {
   public:
    explicit DeviceMoverOwner(Pipeline* p) : p_(p) {}
    std::optional<uint32_t> TryAcquireChunk(uint32_t write_bytes) override CAIRN_REQUIRES(p_->mu_);
    void Unpin(const EntryPtr& e) override CAIRN_REQUIRES(p_->mu_);
    void Drained(const EntryPtr& e, uint32_t block, DeviceMover::TimePoint t0,
                 DeviceMover::TimePoint t1, bool bounced) override CAIRN_REQUIRES(p_->mu_);
    void Fail(const EntryPtr& e, const Status& s) override CAIRN_REQUIRES(p_->mu_);
    void Prefetched(const EntryPtr& e, uint64_t bytes, DeviceMover::TimePoint t0) override
        CAIRN_REQUIRES(p_->mu_);
    void WaitForSlot(const char* span) override CAIRN_REQUIRES(p_->mu_);

   private:
    Pipeline* const p_;
  };

  // A touched chunk may serve a waiting prefetch.
  class InitializerOwner final : public Initializer::Owner {
   public:
    explicit InitializerOwner(Pipeline* p) : p_(p) {}
    void Touched() override CAIRN_REQUIRES(p_->mu_);

   private:
    Pipeline* const p_;
  };

  // More device-cache slots were mapped: wakes captures and the device
  // mover waiting for one. Called by the mapping thread, which holds no
  // lock of ours; taking mu_ orders the wake-up after any waiter's
  // predicate check.
  class DeviceCacheOwner final : public gpu::MappingListener {
   public:
    explicit DeviceCacheOwner(Pipeline* p) : p_(p) {}
    void Mapped() override CAIRN_EXCLUDES(p_->mu_);

   private:
    Pipeline* const p_;
  };

  // The persistent copy of e ended with s, from the cache (the persister)
  // or from the local file (the mover's copy); span null: failed before
  // anything was traced (persistence.cpp).
  static void NotePersisted(Pipeline* p, const EntryPtr& e, const Status& s,
                            std::chrono::steady_clock::time_point t0, double seconds,
                            const char* span) CAIRN_REQUIRES(p->mu_);

  explicit StageOwners(Pipeline* p)
      : checksummer(p),
        flusher(p),
        persister(p),
        mover(p),
        prefetcher(p),
        device_mover(p),
        initializer(p),
        device_cache(p) {}

  ChecksummerOwner checksummer;
  FlusherOwner flusher;
  PersisterOwner persister;
  MoverOwner mover;
  PrefetcherOwner prefetcher;
  DeviceMoverOwner device_mover;
  InitializerOwner initializer;
  DeviceCacheOwner device_cache;
};

}  // namespace cairn::core
