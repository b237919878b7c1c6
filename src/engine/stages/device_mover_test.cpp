// The DeviceMover driven without a pipeline, over the fake CUDA driver: a
// fake owner holds the host chunks and books what the mover reports; the
// device cache and the copy streams are real (on the fake). Every wait is on
// the shared condition variable, never a sleep.
#include "engine/stages/device_mover.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "testing/entry_state.hpp"
#include "testing/fake_cuda/fake_cuda_fixture.hpp"
#include "testing/test_util.hpp"

namespace cairn::core {
namespace {

#if CAIRN_TEST_FAKE_CUDA

constexpr uint32_t kBlock = 1u << 20;  // a block and a slot
constexpr uint32_t kChunks = 8;        // host-cache chunks of the fake owner

class DeviceMoverTest : public test::FakeCudaTest,
                        public DeviceMover::Owner,
                        public gpu::MappingListener {
 protected:
  void SetUp() override {
    test::FakeCudaTest::SetUp();
    if (HasFatalFailure()) return;
    auto rt = gpu::Runtime::Open(d(), -1);
    ASSERT_TRUE(rt.ok()) << rt.status().ToString();
    rt_ = std::move(rt).value();
    io_.emplace(rt_.get(), Status::Ok(), kBlock, 1);
    ASSERT_TRUE(io_->Ensure().ok());
    Result<HostCache> host =
        HostCache::Create(uint64_t{kChunks} * kBlock, kBlock, os::MapOptions{});
    ASSERT_TRUE(host.ok()) << host.status().ToString();
    {
      MutexLock l(&mu_);
      store_.Adopt(std::move(host).value());
    }
    mover_.emplace(&mu_, &done_, &evictions_, nullptr, &store_, &movers_, &catalog_, /*depth=*/0,
                   Interface());
  }
  void TearDown() override {
    {
      MutexLock l(&mu_);
      // A test that failed early leaves no gate shut.
      mapping_released_ = true;
      chunks_allowed_ = true;
      done_.notify_all();
    }
    if (mover_) mover_->Stop();
    cache_.reset();  // joins the mapping thread (which may still wake the mover)
    mover_.reset();
    {
      MutexLock l(&mu_);
      store_.Close();
    }
    io_.reset();
    rt_.reset();
    test::FakeCudaTest::TearDown();
  }

  // The test fixture is the mover's owner.
  DeviceMover::Owner* Interface() { return this; }
  std::optional<uint32_t> TryAcquireChunk(uint32_t) override CAIRN_REQUIRES(mu_) {
    ++chunk_asks_;
    done_.notify_all();
    if (!chunks_allowed_) return std::nullopt;
    return store_.TryAcquire(kBlock, nullptr, /*below_seq=*/0, -1);  // evicts nothing
  }
  void Unpin(const EntryPtr& e) override CAIRN_REQUIRES(mu_) {
    --test::StateOf(*e).pins, ++unpins_;
  }
  void Drained(const EntryPtr& e, uint32_t b, DeviceMover::TimePoint t0, DeviceMover::TimePoint t1,
               bool bounced) override CAIRN_REQUIRES(mu_) {
    EXPECT_GT(e->pins(), 0);  // before the unpin
    EXPECT_LE(t0, t1);
    EXPECT_TRUE(bounced);
    drained_.emplace_back(e->number, b);
  }
  void Fail(const EntryPtr& e, const Status& s) override CAIRN_REQUIRES(mu_) {
    test::StateOf(*e).local.error = s;
    fails_.push_back(s);
  }
  void Prefetched(const EntryPtr& e, uint64_t bytes, DeviceMover::TimePoint) override
      CAIRN_REQUIRES(mu_) {
    prefetched_.push_back(e->number);
    prefetched_bytes_ += bytes;
  }
  void WaitForSlot(const char* span) override CAIRN_REQUIRES(mu_) {
    slot_waits_.emplace_back(span);
    done_.notify_all();
    done_.wait(mu_);
  }
  // The cache's listener (the mapping thread): the first chunk's call holds
  // the mapping until mapping_released_.
  void Mapped() override {
    MutexLock l(&mu_);
    ++progress_calls_;
    done_.notify_all();
    done_.wait(l, [&]() CAIRN_REQUIRES(mu_) { return mapping_released_; });
    mover_->Wake();
  }

  // A device cache of `slots` slots; incremental ones map two slots per
  // chunk, and the first chunk's progress call holds the mapping until
  // mapping_released_.
  void MakeCache(uint32_t slots, DeviceCacheInit init) {
    gpu::DeviceCacheOptions o{.capacity_bytes = uint64_t{slots} * kBlock,
                              .slot_bytes = kBlock,
                              .init = init,
                              .map_chunk_bytes = 2 * uint64_t{kBlock}};
    o.listener = this;
    auto c = gpu::DeviceCache::Create(*rt_, o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cache_ = std::move(c).value();
    MutexLock l(&mu_);
    mover_->Attach(cache_.get(), &*io_);
  }

  // An entry of one device region of `nblocks` blocks (the last one short),
  // ranked `seq`.
  EntryPtr MakeEntry(int64_t number, uint32_t nblocks, uint64_t seq,
                     format::EntryKind kind = format::EntryKind::kCheckpoint) {
    auto e = std::make_shared<Entry>();
    e->seq = seq;
    e->kind = kind;
    e->name = "v";
    e->number = number;
    e->layout = format::Layout::Make(
        {{.id = 1, .memory = MemoryKind::kDevice, .bytes = uint64_t{nblocks} * kBlock - 1000}},
        kBlock);
    test::StateOf(*e).blocks.resize(e->layout.blocks.size());
    return e;
  }
  static std::vector<uint8_t> Pattern(const Entry& e, uint32_t b) {
    return test::SplitMixPattern(e.layout.blocks[b].length, static_cast<uint64_t>(e.number), b);
  }

  // Captures e as the capture path does: a slot per block (no waiting), the
  // device copies with the lock dropped, then sealed and pushed for drains.
  void Capture(const EntryPtr& e) {
    for (uint32_t b = 0; b < e->blocks().size(); ++b) {
      void* dst = nullptr;
      {
        MutexLock l(&mu_);
        auto slot = mover_->TryAcquireSlot();
        ASSERT_TRUE(slot.has_value()) << "block " << b;
        test::StateOf(*e).blocks[b].slot = static_cast<int32_t>(*slot);
        dst = reinterpret_cast<void*>(cache_->address(*slot));
      }
      const std::vector<uint8_t> data = Pattern(*e, b);
      const CopySegment seg{.dst = dst, .src = data.data(), .bytes = data.size()};
      ASSERT_TRUE(io_->CaptureCopy({&seg, 1}).ok());
      MutexLock l(&mu_);
      test::StateOf(*e).blocks[b].dsealed = true;
      mover_->Push(e, b);
    }
    MutexLock l(&mu_);
    test::StateOf(*e).capture.done = true;
  }

  // Puts e's blocks in host chunks, as a flushed history step that the host
  // prefetcher brought back.
  void MakeResident(const EntryPtr& e) CAIRN_REQUIRES(mu_) {
    for (uint32_t b = 0; b < e->blocks().size(); ++b) {
      auto c = TryAcquireChunk(kBlock);
      ASSERT_TRUE(c.has_value());
      const std::vector<uint8_t> data = Pattern(*e, b);
      std::copy(data.begin(), data.end(), store_.data(*c));
      BlockState& bs = test::StateOf(*e).blocks[b];
      bs.chunk = static_cast<int32_t>(*c);
      bs.sealed = bs.written = bs.crc_ready = true;
    }
    test::StateOf(*e).capture.sealed_blocks = test::StateOf(*e).capture.resident_blocks =
        static_cast<uint32_t>(e->blocks().size());
    test::StateOf(*e).capture.done = test::StateOf(*e).local.committed = true;
  }

  // The bytes of a slot, read back through the restore stream.
  std::vector<uint8_t> SlotBytes(uint32_t slot, size_t n) {
    std::vector<uint8_t> out(n);
    const CopySegment seg{
        .dst = out.data(), .src = reinterpret_cast<void*>(cache_->address(slot)), .bytes = n};
    EXPECT_TRUE(io_->RestoreCopy({&seg, 1}).ok());
    return out;
  }

  // Waits on done_ until pred holds; a bug shows as a failure after a
  // minute, not as a hang.
  template <typename Pred>
  bool Await(MutexLock& l, Pred pred) {
    return done_.wait_for(l, std::chrono::seconds(60), pred);
  }
  // Until n drains ended (each unpins once, copied or failed) and none is left.
  void WaitDrainsEnded(size_t n) {
    MutexLock l(&mu_);
    EXPECT_TRUE(Await(l, [&]() CAIRN_REQUIRES(mu_) {
      return unpins_ >= static_cast<int>(n) && !mover_->DrainsPending();
    })) << "drains never ended";
  }

  Mutex mu_;
  std::condition_variable_any done_;
  std::unique_ptr<gpu::Runtime> rt_;
  std::optional<DeviceIo> io_;
  std::unique_ptr<gpu::DeviceCache> cache_;
  uint64_t holds_released_ = 0;
  // The host tier: kChunks chunks.
  BlockStore store_ CAIRN_GUARDED_BY(mu_){
      {.evictions = &evictions_, .holds_released = &holds_released_}, nullptr, &done_};
  bool chunks_allowed_ CAIRN_GUARDED_BY(mu_) = true;
  int chunk_asks_ CAIRN_GUARDED_BY(mu_) = 0;
  bool mapping_released_ CAIRN_GUARDED_BY(mu_) = false;
  int progress_calls_ CAIRN_GUARDED_BY(mu_) = 0;
  int unpins_ CAIRN_GUARDED_BY(mu_) = 0;
  MemoryMovers movers_;     // the drains count as background I/O
  uint64_t evictions_ = 0;  // written by the mover under mu_
  std::vector<std::pair<int64_t, uint32_t>> drained_
      CAIRN_GUARDED_BY(mu_);  // (number, block), in order
  std::vector<Status> fails_ CAIRN_GUARDED_BY(mu_);
  std::vector<int64_t> prefetched_ CAIRN_GUARDED_BY(mu_);
  uint64_t prefetched_bytes_ CAIRN_GUARDED_BY(mu_) = 0;
  std::vector<std::string> slot_waits_ CAIRN_GUARDED_BY(mu_);
  Catalog catalog_ CAIRN_GUARDED_BY(mu_);  // the popped history a test sets up
  std::optional<DeviceMover> mover_;       // last: stopped first
};

TEST_F(DeviceMoverTest, DrainsInCaptureOrderIntoHostChunks) {
  MakeCache(8, DeviceCacheInit::kDirect);
  EntryPtr a = MakeEntry(1, 3, 1), b = MakeEntry(2, 2, 2);
  Capture(a);
  Capture(b);
  {
    MutexLock l(&mu_);
    EXPECT_TRUE(mover_->DrainsPending());  // queued, not started
  }
  mover_->Start(nullptr);
  WaitDrainsEnded(5);
  MutexLock l(&mu_);
  const std::vector<std::pair<int64_t, uint32_t>> fifo{{1, 0}, {1, 1}, {1, 2}, {2, 0}, {2, 1}};
  EXPECT_EQ(drained_, fifo);
  EXPECT_EQ(unpins_, 5);
  EXPECT_EQ(movers_.now(MemoryMovers::Kind::kBackgroundIo), 0);
  for (const EntryPtr& e : {a, b}) {
    EXPECT_EQ(e->pins(), 0);
    EXPECT_EQ(e->capture().resident_blocks, e->blocks().size());
    EXPECT_EQ(e->capture().sealed_blocks, e->blocks().size());
    for (uint32_t k = 0; k < e->blocks().size(); ++k) {
      const BlockState& bs = test::StateOf(*e).blocks[k];
      ASSERT_TRUE(e->in_host(k) && e->in_device(k)) << e->number << "/" << k;
      EXPECT_TRUE(bs.dclean);  // the slot is evictable now
      const std::vector<uint8_t> want = Pattern(*e, k);
      const uint8_t* chunk = store_.data(static_cast<uint32_t>(bs.chunk));
      EXPECT_TRUE(std::equal(want.begin(), want.end(), chunk)) << e->number << "/" << k;
      // The tail up to the next 4 KiB is zeroed (direct I/O writes it).
      const size_t padded = format::AlignUp(want.size());
      EXPECT_TRUE(
          std::all_of(chunk + want.size(), chunk + padded, [](uint8_t c) { return c == 0; }));
    }
  }
}

TEST_F(DeviceMoverTest, ASlotIsEvictableOnlyOnceItsBlockIsInAHostChunk) {
  MakeCache(2, DeviceCacheInit::kDirect);
  {
    MutexLock l(&mu_);
    chunks_allowed_ = false;  // the host cache is full
  }
  mover_->Start(nullptr);
  EntryPtr a = MakeEntry(1, 2, 1);
  Capture(a);
  {
    MutexLock l(&mu_);
    ASSERT_TRUE(Await(
        l, [&]() CAIRN_REQUIRES(mu_) { return chunk_asks_ > 0; }));  // the drain waits for a chunk
    EXPECT_TRUE(mover_->DrainsPending());
    EXPECT_EQ(a->pins(), 0);  // not pinned while it waits
    // Both slots hold blocks that exist nowhere else: no slot for a newer capture.
    EXPECT_FALSE(mover_->TryAcquireSlot().has_value());
    EXPECT_EQ(evictions_, 0u);
    EXPECT_FALSE(a->blocks()[0].dclean || a->blocks()[1].dclean);
    chunks_allowed_ = true;
    done_.notify_all();
  }
  WaitDrainsEnded(2);
  MutexLock l(&mu_);
  auto slot = mover_->TryAcquireSlot();  // evicts a drained block of a
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(evictions_, 1u);
  const uint32_t evicted = a->blocks()[0].slot < 0 ? 0 : 1;
  EXPECT_LT(a->blocks()[evicted].slot, 0);
  EXPECT_TRUE(a->in_host(evicted));  // still in the host tier
  EXPECT_TRUE(a->fully_cached());
}

TEST_F(DeviceMoverTest, ADrainFailureFailsTheEntryAndKeepsItsSlotRestorable) {
  MakeCache(2, DeviceCacheInit::kDirect);
  EntryPtr a = MakeEntry(7, 1, 1);
  Capture(a);
  ASSERT_EQ(ctl_.set_fail("cuMemcpyAsync:1:CUDA_ERROR_INVALID_VALUE"), 0);  // the drain's copy
  mover_->Start(nullptr);
  MutexLock l(&mu_);
  ASSERT_TRUE(
      Await(l, [&]() CAIRN_REQUIRES(mu_) { return unpins_ == 1 && !mover_->DrainsPending(); }));
  ASSERT_EQ(fails_.size(), 1u);
  EXPECT_NE(fails_[0].message().find("device -> host copy of 'v' 7 block 0"), std::string::npos)
      << fails_[0].ToString();
  EXPECT_TRUE(a->failed());
  EXPECT_TRUE(drained_.empty());
  EXPECT_EQ(a->pins(), 0);
  EXPECT_LT(a->blocks()[0].chunk, 0);  // the chunk went back
  EXPECT_EQ(store_.cache().free_count(), kChunks);
  EXPECT_TRUE(a->in_device(0));                       // still restorable from the device
  EXPECT_TRUE(a->blocks()[0].dclean);                 // but evictable: it can never be flushed
  ASSERT_TRUE(mover_->TryAcquireSlot().has_value());  // the free one
  ASSERT_TRUE(mover_->TryAcquireSlot().has_value());  // a's
  EXPECT_EQ(evictions_, 1u);
}

TEST_F(DeviceMoverTest, PrefetchLoadsTheNextPoppedStepsIntoSlotsHighestFirst) {
  MakeCache(4, DeviceCacheInit::kDirect);
  EntryPtr s2 = MakeEntry(2, 2, 2, format::EntryKind::kHistoryStep);
  EntryPtr s1 = MakeEntry(1, 2, 1, format::EntryKind::kHistoryStep);
  {
    MutexLock l(&mu_);
    MakeResident(s2);
    MakeResident(s1);
    catalog_.OpenHistory("v").popping = true;  // being popped: its steps are prefetched
    for (const EntryPtr& e : {s1, s2}) {
      const uint64_t seq = e->seq;
      catalog_.Add(e);
      e->seq = seq;  // the rank MakeEntry gave it
    }
  }
  mover_->Start(nullptr);
  MutexLock l(&mu_);
  ASSERT_TRUE(Await(l, [&]() CAIRN_REQUIRES(mu_) { return prefetched_.size() >= 2; }));
  EXPECT_EQ(prefetched_, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(prefetched_bytes_, s2->layout.payload_bytes + s1->layout.payload_bytes);
  EXPECT_TRUE(drained_.empty());  // nothing to drain: they came from the host
  for (const EntryPtr& e : {s2, s1}) {
    EXPECT_TRUE(e->fully_in_device());
    EXPECT_EQ(e->pins(), 0);
    EXPECT_FALSE(e->reads().device_prefetching);
    for (uint32_t k = 0; k < e->blocks().size(); ++k) {
      EXPECT_TRUE(e->blocks()[k].dclean);  // also in the host tier: evictable
      EXPECT_TRUE(e->in_host(k));
      const uint32_t slot = static_cast<uint32_t>(e->blocks()[k].slot);
      const size_t n = e->layout.blocks[k].length;
      l.Unlock();
      const std::vector<uint8_t> got = SlotBytes(slot, n);
      l.Lock();
      EXPECT_EQ(got, Pattern(*e, k)) << e->number << "/" << k;
    }
  }
}

TEST_F(DeviceMoverTest, NoEvictionWhileTheCacheIsStillBeingMapped) {
  MakeCache(4, DeviceCacheInit::kIncremental);  // 2 chunks of 2 slots
  {
    MutexLock l(&mu_);
    // The first chunk is mapped, and the mapping held.
    ASSERT_TRUE(Await(l, [&]() CAIRN_REQUIRES(mu_) { return progress_calls_ == 1; }));
    ASSERT_EQ(cache_->mapped_slots(), 2u);
    ASSERT_FALSE(cache_->mapping_done());
    EXPECT_TRUE(mover_->CacheUsable());
  }
  mover_->Start(nullptr);
  EntryPtr a = MakeEntry(1, 2, 1);
  Capture(a);
  WaitDrainsEnded(2);
  std::optional<int32_t> got;
  std::thread capture;
  {
    MutexLock l(&mu_);
    ASSERT_TRUE(a->blocks()[0].dclean && a->blocks()[1].dclean);  // both drained
    EXPECT_FALSE(mover_->TryAcquireSlot().has_value());       // not evicted: more slots are coming
    EXPECT_EQ(evictions_, 0u);
    capture = std::thread([&] {
      MutexLock cl(&mu_);
      got = mover_->AcquireSlot();
    });
    EXPECT_TRUE(Await(l, [&]() CAIRN_REQUIRES(mu_) { return !slot_waits_.empty(); }));
    EXPECT_EQ(slot_waits_.empty() ? std::string() : slot_waits_[0],
              "blocked: device cache mapping");
    mapping_released_ = true;
    done_.notify_all();
  }
  capture.join();
  MutexLock l(&mu_);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, 2);  // a newly mapped slot, not an evicted one
  EXPECT_EQ(evictions_, 0u);
  ASSERT_TRUE(Await(l, [&]() CAIRN_REQUIRES(mu_) { return cache_->mapping_done(); }));
  EXPECT_EQ(mover_->TryAcquireSlot(), std::optional<uint32_t>(3));
  // Fully mapped and full: now a drained slot goes.
  ASSERT_TRUE(mover_->TryAcquireSlot().has_value());
  EXPECT_EQ(evictions_, 1u);
  EXPECT_TRUE(a->fully_cached());
}

#endif  // CAIRN_TEST_FAKE_CUDA

}  // namespace
}  // namespace cairn::core
