// The state of one zero-copy epoch (capture/zero_copy/zero_copy.hpp), shared
// by the epoch's lifecycle (zero_copy.cpp) and its two sides that move a
// page's state (page_traps.cpp: the fault handler and the reader). The
// states and their transitions are drawn at the top of zero_copy.cpp.
// Internal to libcairn.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "capture/zero_copy/zero_copy.hpp"
#include "os/mem/memory.hpp"

#if defined(__SANITIZE_THREAD__)
#define CAIRN_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CAIRN_TSAN 1
#endif
#endif

namespace cairn::core {
// The page states (zero_copy.cpp draws their transitions), the clock and
// the copy both sides use, and the queues of trapped pages.
namespace zc {

enum : uint8_t {
  kIdle = 0,
  kProtected = 1,
  kReading = 2,
  kCowing = 3,
  kCowed = 4,
  kDone = 5,
  kWatched = 6
};
constexpr uint8_t kRed = 0x80;  // a writer waits for this page's read
constexpr uint8_t kStateMask = 0x7f;
constexpr uint32_t kNoSlot = ~uint32_t{0};

inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Copies bytes of a page that the kernel keeps unchanged (protected, its
// writers blocked). That ordering is invisible to TSan, so under TSan the
// copy is made of relaxed atomic loads (the application's racing writes in
// the tests are relaxed atomic stores): no false report, same bytes.
inline void CopyStable(void* dst, const void* src, size_t n) {
#ifdef CAIRN_TSAN
  auto* d = static_cast<uint8_t*>(dst);
  auto* s = static_cast<const uint8_t*>(src);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t v = __atomic_load_n(reinterpret_cast<const uint64_t*>(s + i), __ATOMIC_RELAXED);
    std::memcpy(d + i, &v, 8);
  }
  for (; i < n; ++i) d[i] = __atomic_load_n(s + i, __ATOMIC_RELAXED);
#else
  std::memcpy(dst, src, n);
#endif
}

// Pages in the order the handler queued them: many producers (the handler
// thread, or signal handlers), one consumer (the reader). Each page is pushed
// at most once, so `slot` (one per page) never wraps.
struct PageQueue {
  std::vector<std::atomic<uint32_t>> slot;  // 1 + page; 0 = being written
  std::atomic<uint32_t> tail{0};
  uint32_t head = 0;  // the reader's
  explicit PageQueue(size_t pages) : slot(pages) {}
  void Reset() {  // only the slots pushed to are not 0
    const uint32_t used = std::min<uint32_t>(tail.load(std::memory_order_relaxed),
                                             static_cast<uint32_t>(slot.size()));
    for (uint32_t i = 0; i < used; ++i) slot[i].store(0, std::memory_order_relaxed);
    tail.store(0, std::memory_order_relaxed);
    head = 0;
  }
  void Push(size_t page) {  // async-signal-safe
    const uint32_t t = tail.fetch_add(1, std::memory_order_relaxed);
    if (t < slot.size()) slot[t].store(static_cast<uint32_t>(page) + 1, std::memory_order_release);
  }
  uint32_t Pushed() const {  // slots claimed by pushes (some may be being written)
    return std::min<uint32_t>(tail.load(std::memory_order_acquire),
                              static_cast<uint32_t>(slot.size()));
  }
  bool Queued() const {
    return head < Pushed();
  }  // the reader's: Pop has (or is about to have) a page
  int64_t Pop() {
    if (head >= Pushed()) return -1;
    const uint32_t v = slot[head].load(std::memory_order_acquire);
    if (v == 0) return -1;  // its producer is between the two steps: next time
    ++head;
    return static_cast<int64_t>(v) - 1;
  }
};

}  // namespace zc

struct ZeroCopy::Epoch {
  struct Range {
    uintptr_t start = 0;
    size_t bytes = 0;
    size_t first_page = 0;  // index of its first page in `state`
  };
  std::vector<Range> ranges;      // sorted by start; fixed once the handler may see it
  std::vector<Range> registered;  // the capture thread's: what End unregisters
  std::vector<std::atomic<uint8_t>> state;
  std::vector<uint32_t> slot_of;  // written by the handler before kCowed (release)
  uint8_t* cow = nullptr;         // ZeroCopy::cow_'s first `slots` pages
  size_t slots = 0;
  std::vector<uint32_t> ring;     // free slots, SPSC
  std::atomic<uint64_t> head{0};  // the handler's
  std::atomic<uint64_t> tail{0};  // the reader's
  uint32_t spare = zc::kNoSlot;   // the handler's: a slot it took and did not use
  std::atomic<uint64_t> cow_used{0};
  // The flush order's (flush_order.hpp).
  std::vector<std::atomic<uint32_t>> first_write;  // 1 + sequence number; 0 = none yet
  std::atomic<uint32_t> write_seq{0};
  zc::PageQueue red_q, orange_q;
  std::vector<PageSeen> seen;  // the reader's: color and read position of done pages
  uint32_t reads = 0;          // the reader's
  uint32_t to_read = 0;        // pages the version stores (Begin)
  bool watch = false;          // this epoch watches (Begin)
  // Planned in address order, the learned order's fallback (Begin;
  // flush_order.hpp): not watched, not scored.
  bool address = false;
  uint64_t traps_before = 0;   // RED + ORANGE counted before it (Begin)
  // Watching: set by End once every page was read; first writes numbered
  // from completed_at on came after the version was complete (BLUE).
  std::atomic<bool> completed{false};
  std::atomic<uint32_t> completed_at{0};
  // Written was asked (seq_cst with the handler's state change): first
  // writes from then on are `late`, reported again next epoch (`carry`).
  std::atomic<bool> collected{false};
  std::vector<std::atomic<uint8_t>> late;
  std::vector<uint8_t> carry;  // the capture thread's
  bool carried = false;        // some carry is set (Begin)

  Epoch(size_t pages, size_t nslots)
      : state(pages),
        slot_of(pages, zc::kNoSlot),
        slots(nslots),
        ring(nslots),
        first_write(pages),
        red_q(pages),
        orange_q(pages),
        seen(pages),
        late(pages),
        carry(pages, 0) {}
  // A finished epoch made new for the same page and slot counts: refilling
  // arrays whose memory is already there is a few ms for 1 GiB, where fresh
  // allocations of ~10 MB would fault every page in again on the checkpoint
  // call. Only after the handler can no longer see it (Finish). Arrays
  // written only where the epoch used them are cleared only there: slot_of
  // is read only for pages the handler made kCowed (after writing it), the
  // queues up to their tails, late only once Written was asked, carry only
  // when set. keep_seen: `seen` still holds the finished epoch's record, which
  // SettleHistory learns and clears.
  bool Fits(size_t pages, size_t nslots) const { return state.size() == pages && slots == nslots; }
  void Reset(bool keep_seen) {
    ranges.clear();
    registered.clear();
    for (auto& x : state) x.store(zc::kIdle, std::memory_order_relaxed);
    head.store(0, std::memory_order_relaxed);
    tail.store(0, std::memory_order_relaxed);
    spare = zc::kNoSlot;
    cow_used.store(0, std::memory_order_relaxed);
    for (auto& x : first_write) x.store(0, std::memory_order_relaxed);
    write_seq.store(0, std::memory_order_relaxed);
    red_q.Reset();
    orange_q.Reset();
    if (!keep_seen) std::fill(seen.begin(), seen.end(), PageSeen{});
    reads = 0;
    completed.store(false, std::memory_order_relaxed);
    completed_at.store(0, std::memory_order_relaxed);
    to_read = 0;
    watch = false;
    traps_before = 0;
    if (collected.exchange(false, std::memory_order_relaxed)) {
      for (auto& x : late) x.store(0, std::memory_order_relaxed);
    }
    if (std::exchange(carried, false)) std::fill(carry.begin(), carry.end(), 0);
  }
  void Seen(size_t page, PageColor c) {  // reader only
    seen[page].color = c;
    seen[page].read_pos = reads++;
  }

  // The page index of page-aligned address a, or -1.
  int64_t PageOf(uintptr_t a) const {
    auto it = std::upper_bound(ranges.begin(), ranges.end(), a,
                               [](uintptr_t x, const Range& r) { return x < r.start; });
    if (it == ranges.begin()) return -1;
    --it;
    if (a >= it->start + it->bytes) return -1;
    return static_cast<int64_t>(it->first_page + (a - it->start) / os::PageSize());
  }
  // The page at address a, if it is one of the epoch's, is reported written
  // at the next Written (capture thread).
  void CarryAt(uintptr_t a) {
    if (const int64_t i = PageOf(a); i >= 0) {
      carry[static_cast<size_t>(i)] = 1;
      carried = true;
    }
  }
  // The range holding page index i.
  const Range& RangeOfPage(size_t i) const {
    auto it = std::upper_bound(ranges.begin(), ranges.end(), i,
                               [](size_t p, const Range& r) { return p < r.first_page; });
    return *--it;
  }
  uintptr_t AddressOf(size_t page) const {
    const Range& r = RangeOfPage(page);
    return r.start + (page - r.first_page) * os::PageSize();
  }
  uint32_t TakeSlot() {  // handler only
    if (spare != zc::kNoSlot) return std::exchange(spare, zc::kNoSlot);
    const uint64_t h = head.load(std::memory_order_relaxed);
    if (h == tail.load(std::memory_order_acquire)) return zc::kNoSlot;
    const uint32_t s = ring[h % slots];
    head.store(h + 1, std::memory_order_release);
    return s;
  }
  void GiveSlot(uint32_t s) {  // reader only (and Begin)
    const uint64_t t = tail.load(std::memory_order_relaxed);
    ring[t % slots] = s;
    tail.store(t + 1, std::memory_order_release);
  }
  uint8_t* SlotData(uint32_t s) const { return cow + static_cast<size_t>(s) * os::PageSize(); }
};

}  // namespace cairn::core
