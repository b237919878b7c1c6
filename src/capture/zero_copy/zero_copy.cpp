// Zero-copy capture epochs (capture/zero_copy/zero_copy.hpp).
//
// Each protected page has one state byte, moved by compare-and-swap between
// the reader (the capture thread) and the fault handler (os::WriteProtect's
// thread), so that a page's bytes at Begin are read exactly once, either
// from application memory while it is still protected or from its COW slot:
//
//   kProtected --reader--> kReading --reader--> kDone   (GREEN, or RED if a
//        |                     ^ writer waits: kRed bit, set by the handler)
//        |                     +-----reader--> kWatched --handler--> kDone
//        +--handler, slot free--> kCowing --> kCowed --reader--> kDone (ORANGE)
//
// Watching (userfaultfd only, when the owner asks for it): a page read with
// no writer waiting stays protected (kWatched) until its first write, which
// the handler numbers and releases (one extra fault per page first-written
// after its read: GREEN before End, BLUE after); End then keeps the ranges
// registered, and the next Begin (or StopWatching) ends the watch. So the
// history knows every page's first write, and which pages were not written
// at all since the last Begin (Written: checkpoint.changes = pages). A
// watching Begin protects its ranges whole: pages outside the version's
// extents start as kWatched (not read, their first write only recorded).
// A write after Written looked (the checkpoint call is between its Plan and
// its Begin) is marked `late` and reported by the next epoch's Written.
//
// The handler never allocates: slots come from a ring filled at Begin
// (single producer: the reader gives slots back; single consumer: the
// handler takes them), page states and slot numbers are arrays sized at
// Begin. A RED writer stays blocked in the kernel until the reader's Release
// of its page (or End) wakes it.
//
// For the flush order (capture/zero_copy/flush_order.hpp) the handler also numbers each
// page's first trapped write (one CAS on a preallocated word) and appends
// pages that go RED or ORANGE to two preallocated queues (one slot per page:
// a page enters each at most once per epoch, so they never fill up).
#include "capture/zero_copy/zero_copy.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "os/protect/write_protect.hpp"

#if defined(__SANITIZE_THREAD__)
#define CAIRN_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CAIRN_TSAN 1
#endif
#endif

namespace cairn::core {
namespace {

enum : uint8_t { kIdle = 0, kProtected = 1, kReading = 2, kCowing = 3, kCowed = 4, kDone = 5, kWatched = 6 };
constexpr uint8_t kRed = 0x80;  // a writer waits for this page's read
constexpr uint8_t kStateMask = 0x7f;
constexpr uint32_t kNoSlot = ~uint32_t{0};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Copies bytes of a page that the kernel keeps unchanged (protected, its
// writers blocked). That ordering is invisible to TSan, so under TSan the
// copy is made of relaxed atomic loads (the application's racing writes in
// the tests are relaxed atomic stores): no false report, same bytes.
void CopyStable(void* dst, const void* src, size_t n) {
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
    const uint32_t used = std::min<uint32_t>(tail.load(std::memory_order_relaxed), static_cast<uint32_t>(slot.size()));
    for (uint32_t i = 0; i < used; ++i) slot[i].store(0, std::memory_order_relaxed);
    tail.store(0, std::memory_order_relaxed);
    head = 0;
  }
  void Push(size_t page) {  // async-signal-safe
    const uint32_t t = tail.fetch_add(1, std::memory_order_relaxed);
    if (t < slot.size()) slot[t].store(static_cast<uint32_t>(page) + 1, std::memory_order_release);
  }
  uint32_t Pushed() const {  // slots claimed by pushes (some may be being written)
    return std::min<uint32_t>(tail.load(std::memory_order_acquire), static_cast<uint32_t>(slot.size()));
  }
  bool Queued() const { return head < Pushed(); }  // the reader's: Pop has (or is about to have) a page
  int64_t Pop() {
    if (head >= Pushed()) return -1;
    const uint32_t v = slot[head].load(std::memory_order_acquire);
    if (v == 0) return -1;  // its producer is between the two steps: next time
    ++head;
    return static_cast<int64_t>(v) - 1;
  }
};

}  // namespace

struct ZeroCopy::Epoch {
  struct Range {
    uintptr_t start = 0;
    size_t bytes = 0;
    size_t first_page = 0;  // index of its first page in `state`
  };
  std::vector<Range> ranges;  // sorted by start; fixed once the handler may see it
  std::vector<Range> registered;  // the capture thread's: what End unregisters
  std::vector<std::atomic<uint8_t>> state;
  std::vector<uint32_t> slot_of;  // written by the handler before kCowed (release)
  uint8_t* cow = nullptr;         // ZeroCopy::cow_'s first `slots` pages
  size_t slots = 0;
  std::vector<uint32_t> ring;  // free slots, SPSC
  std::atomic<uint64_t> head{0};  // the handler's
  std::atomic<uint64_t> tail{0};  // the reader's
  uint32_t spare = kNoSlot;        // the handler's: a slot it took and did not use
  std::atomic<uint64_t> cow_used{0};
  // The flush order's (flush_order.hpp).
  std::vector<std::atomic<uint32_t>> first_write;  // 1 + sequence number; 0 = none yet
  std::atomic<uint32_t> write_seq{0};
  PageQueue red_q, orange_q;
  std::vector<PageSeen> seen;  // the reader's: color and read position of done pages
  uint32_t reads = 0;          // the reader's
  uint32_t to_read = 0;        // pages the version stores (Begin)
  bool watch = false;          // this epoch watches (Begin)
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
      : state(pages), slot_of(pages, kNoSlot), slots(nslots), ring(nslots), first_write(pages), red_q(pages),
        orange_q(pages), seen(pages), late(pages), carry(pages, 0) {}
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
    for (auto& x : state) x.store(kIdle, std::memory_order_relaxed);
    head.store(0, std::memory_order_relaxed);
    tail.store(0, std::memory_order_relaxed);
    spare = kNoSlot;
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
    if (spare != kNoSlot) return std::exchange(spare, kNoSlot);
    const uint64_t h = head.load(std::memory_order_relaxed);
    if (h == tail.load(std::memory_order_acquire)) return kNoSlot;
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

uint64_t ZeroCopy::CowBytes(double cow_fraction, uint64_t protected_bytes) {
  if (!(cow_fraction > 0)) return 0;
  const uint64_t page = os::PageSize();
  auto want = static_cast<uint64_t>(cow_fraction * static_cast<double>(protected_bytes));
  want = (want + page - 1) / page * page;
  return std::min(std::max(want, kMinCowPages * page), kMaxCowBytes);
}

ZeroCopy::ZeroCopy(double cow_fraction) : cow_fraction_(cow_fraction) {}

Result<std::unique_ptr<ZeroCopy>> ZeroCopy::Create(double cow_fraction, WriteProtectMode mode, bool watch,
                                                  size_t watch_group) {
  auto z = CreateUnwatched(cow_fraction, mode);
  // mprotect: each page released singly splits the mapping (VMAs), so a
  // watch over many pages written in random order would run into
  // vm.max_map_count; only userfaultfd watches.
  if (z.ok()) {
    (*z)->watch_ = watch && (*z)->mechanism() == os::WpMechanism::kUserfaultfd;
    (*z)->watch_group_ = std::max<size_t>(watch_group, 1);
  }
  return z;
}

Result<std::unique_ptr<ZeroCopy>> ZeroCopy::CreateUnwatched(double cow_fraction, WriteProtectMode mode) {
  std::unique_ptr<ZeroCopy> z(new ZeroCopy(cow_fraction));
  // OnFault runs on the userfaultfd handler thread, or (mprotect) in the
  // writing thread's SIGSEGV handler: the same logic either way.
  auto on_fault = [p = z.get()](uintptr_t page) { return p->OnFault(page); };
  std::string skipped;
  if (mode != WriteProtectMode::kMprotect) {
    auto wp = os::WriteProtect::Create(os::WpMechanism::kUserfaultfd, on_fault);
    if (wp.ok() || mode == WriteProtectMode::kUserfaultfd) {
      CAIRN_ASSIGN_OR_RETURN(z->wp_, std::move(wp));
      return z;
    }
    skipped = "userfaultfd: " + wp.status().message();
  }
  auto wp = os::WriteProtect::Create(os::WpMechanism::kMprotect, on_fault);
  if (!wp.ok()) {
    return Status::Unsupported((skipped.empty() ? "" : skipped + "; ") + "mprotect: " + wp.status().message());
  }
  z->wp_ = std::move(wp).value();
  z->wp_note_ = std::move(skipped);
  return z;
}

os::WpMechanism ZeroCopy::mechanism() const { return wp_->mechanism(); }

ZeroCopy::~ZeroCopy() {
  End();
  StopWatching();
  wp_.reset();  // joins the handler
}

Status ZeroCopy::Begin(const std::vector<ZeroCopyRange>& ranges, const std::vector<ZeroCopyPiece>& copied) {
  if (in_epoch()) return Status::State("zero-copy: an epoch is already in progress");
  // The bytes on no protected page are taken now, as a copy capture would.
  copied_.clear();
  size_t copied_total = 0;
  for (const ZeroCopyPiece& p : copied) {
    if (p.bytes == 0) continue;
    copied_.push_back({reinterpret_cast<uintptr_t>(p.data), p.bytes, copied_total});
    copied_total += p.bytes;
  }
  copied_bytes_.resize(copied_total);
  for (const Copied& c : copied_) std::memcpy(copied_bytes_.data() + c.at, reinterpret_cast<const void*>(c.start), c.bytes);
  std::sort(copied_.begin(), copied_.end(), [](const Copied& a, const Copied& b) { return a.start < b.start; });
  std::vector<ZeroCopyRange> sorted = ranges;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.data < b.data; });
  // The last epoch's watch ends here: its history is complete. The same
  // ranges stay registered (unregistering 1 GiB of 4 KiB pages walks every
  // page table entry: ~12 ms on the checkpoint call); their watched pages
  // are still protected, and until the protection below a write to one is
  // released by the handler (no epoch).
  const bool keep = watching() && std::equal(sorted.begin(), sorted.end(), epoch_->registered.begin(),
                                             epoch_->registered.end(), [](const auto& a, const auto& b) {
                                               return reinterpret_cast<uintptr_t>(a.data) == b.start &&
                                                      a.bytes == b.bytes;
                                             });
  if (watching()) Finish(/*keep_registered=*/keep);
  if (between_hook_ != nullptr) between_hook_(between_arg_);
  const size_t page = os::PageSize();
  size_t pages = 0;
  uint64_t protect_bytes = 0;
  for (const auto& r : sorted) {
    if (r.bytes % page != 0 || reinterpret_cast<uintptr_t>(r.data) % page != 0) {
      return Status::Unsupported("zero-copy capture needs page-aligned regions (start and size; use cairn_alloc)");
    }
    pages += r.bytes / page;
    protect_bytes += r.extents.empty() ? r.bytes : ExtentBytes(r.extents);
  }
  const uint64_t cow_bytes = CowBytes(cow_fraction_, protect_bytes);
  // The COW buffer stays from one epoch to the next, grown when needed. It
  // is not populated here: faulting 50 MiB of fresh memory in would cost the
  // first checkpoint call ~35 ms, and a slot's page costs its first ORANGE
  // copy (on the handler thread) ~1 us instead, once.
  if (cow_bytes > cow_.size()) {
    cow_ = os::Mapping();
    CAIRN_ASSIGN_OR_RETURN(cow_, os::Mapping::Create(cow_bytes, os::MapOptions{}));
  }
  std::unique_ptr<Epoch> e;
  if (spare_ && spare_->Fits(pages, cow_bytes / page)) {
    e = std::move(spare_);
    if (std::exchange(spare_dirty_, false)) e->Reset(/*keep_seen=*/history_pending_);
  } else {
    SettleHistory();  // before the record it learns from goes
    spare_.reset();
    e = std::make_unique<Epoch>(pages, cow_bytes / page);
  }
  e->cow = cow_.data();
  for (uint32_t s = 0; s < e->slots; ++s) e->GiveSlot(s);
  // Watch this epoch? With a page-sized group (checkpoint.changes = pages:
  // the watch tells the written pages) always. Otherwise only while the
  // order has something to learn: when the last epoch trapped more first
  // writes (RED + ORANGE) than this watch would cost (a fault per written
  // group; on this VM ~0.25 ms each with the application spinning, mostly
  // the handler thread's wake-up), and more than 1.5x the epoch before it.
  // Traps that stay up from one epoch to the next are first writes no order
  // predicts (stray writes redrawn every epoch: the bench's `irregular`),
  // which a watch only pays for: at 128 MiB `irregular` over the reversed
  // order, ~450 watch faults per epoch, 0.11 s, for no fewer traps. A
  // pattern that changes shows up as a jump in traps. The first epoch
  // learns from its traps.
  e->watch = watch_ && (watch_group_ <= 1 || (last_traps_ > pages / watch_group_ && 2 * last_traps_ > 3 * prior_traps_));
  e->traps_before = red_.load(std::memory_order_relaxed) + orange_.load(std::memory_order_relaxed);
  size_t first = 0;
  for (const auto& r : sorted) {
    e->ranges.push_back(Epoch::Range{reinterpret_cast<uintptr_t>(r.data), r.bytes, first});
    first += r.bytes / page;
  }
  // Pages written after the last Written looked are reported again.
  for (const uintptr_t a : late_pages_) e->CarryAt(a);
  late_pages_.clear();
  // States first, then the handler may see the epoch, then protection.
  // Watching: every page of the ranges is watched, those stored are read.
  for (size_t i = 0; e->watch && i < sorted.size(); ++i) {
    for (size_t p = 0; p < sorted[i].bytes / page; ++p) {
      e->state[e->ranges[i].first_page + p].store(kWatched, std::memory_order_relaxed);
    }
  }
  for (size_t i = 0; i < sorted.size(); ++i) {
    const ExtentList whole{Extent{0, sorted[i].bytes}};
    for (const Extent& x : sorted[i].extents.empty() ? whole : sorted[i].extents) {
      for (uint64_t o = x.offset / page * page; o < x.end(); o += page) {
        std::atomic<uint8_t>& st = e->state[e->ranges[i].first_page + o / page];
        if (st.load(std::memory_order_relaxed) != kProtected) ++e->to_read;  // extents may share a page
        st.store(kProtected, std::memory_order_relaxed);
      }
    }
  }
  epoch_ = std::move(e);
  live_.store(epoch_.get(), std::memory_order_seq_cst);
  TakeOrphans(epoch_.get());
  Status s;
  for (size_t i = 0; i < sorted.size() && s.ok(); ++i) {
    if (!keep) s = wp_->Register(sorted[i].data, sorted[i].bytes);
    if (!s.ok()) break;
    epoch_->registered.push_back(epoch_->ranges[i]);
    const ExtentList whole{Extent{0, sorted[i].bytes}};
    for (const Extent& x : sorted[i].extents.empty() || epoch_->watch ? whole : sorted[i].extents) {
      const uint64_t from = x.offset / page * page;
      const uint64_t to = (x.end() + page - 1) / page * page;
      s = wp_->Protect(reinterpret_cast<uintptr_t>(sorted[i].data) + from, to - from);
      if (!s.ok()) break;
    }
  }
  if (!s.ok()) {
    End();
    return s;
  }
  epochs_.fetch_add(1, std::memory_order_relaxed);
  protected_bytes_.fetch_add(protect_bytes, std::memory_order_relaxed);
  cow_bytes_.store(cow_bytes, std::memory_order_relaxed);
  return Status::Ok();
}

// The handler thread: decides by the page's state (see the top of the file).
bool ZeroCopy::OnFault(uintptr_t addr) {
  in_handler_.fetch_add(1, std::memory_order_seq_cst);
  const int64_t t0 = NowNs();
  if (auto* hook = hook_.load(std::memory_order_acquire)) hook(hook_arg_.load(std::memory_order_relaxed));
  bool release = true;
  Epoch* e = live_.load(std::memory_order_seq_cst);
  if (e == nullptr) {  // Begin's window (orphans_): released, and remembered
    const uint32_t n = orphan_count_.fetch_add(1, std::memory_order_relaxed);
    if (n < kOrphans) orphans_[n].store(addr, std::memory_order_relaxed);
  }
  const int64_t i = e != nullptr ? e->PageOf(addr) : -1;
  if (i >= 0) {
    std::atomic<uint8_t>& st = e->state[static_cast<size_t>(i)];
    uint32_t slot = kNoSlot;
    if (const uint8_t low = st.load(std::memory_order_acquire) & kStateMask;
        low == kProtected || low == kReading || low == kWatched) {
      std::atomic<uint32_t>& fw = e->first_write[static_cast<size_t>(i)];
      if (uint32_t none = 0; fw.load(std::memory_order_relaxed) == 0) {
        fw.compare_exchange_strong(none, e->write_seq.fetch_add(1, std::memory_order_relaxed) + 1,
                                   std::memory_order_relaxed);
      }
    }
    for (uint8_t s = st.load(std::memory_order_acquire);;) {
      const uint8_t low = s & kStateMask;
      if (low == kWatched) {  // read already: its first write is numbered above, now it goes
        if (!st.compare_exchange_weak(s, kDone, std::memory_order_seq_cst)) continue;
        if (e->collected.load(std::memory_order_seq_cst)) e->late[static_cast<size_t>(i)].store(1, std::memory_order_relaxed);
        watch_faults_.fetch_add(1, std::memory_order_relaxed);
        if (e->completed.load(std::memory_order_acquire)) blue_.fetch_add(1, std::memory_order_relaxed);
        ReleaseWatchGroup(e, static_cast<size_t>(i));  // wakes the writer: after its counts
        break;
      }
      if (low != kProtected && low != kReading) break;  // read or copied already: release
      if (low == kProtected && (s & kRed) == 0 && slot == kNoSlot) slot = e->TakeSlot();
      if (low == kProtected && (s & kRed) == 0 && slot != kNoSlot) {
        if (!st.compare_exchange_weak(s, kCowing, std::memory_order_acq_rel)) continue;
        CopyStable(e->SlotData(slot), reinterpret_cast<const void*>(addr), os::PageSize());
        e->slot_of[static_cast<size_t>(i)] = slot;
        slot = kNoSlot;
        st.store(kCowed, std::memory_order_release);
        e->orange_q.Push(static_cast<size_t>(i));
        const uint64_t used = (e->cow_used.fetch_add(1, std::memory_order_relaxed) + 1) * os::PageSize();
        for (uint64_t peak = cow_peak_.load(); used > peak && !cow_peak_.compare_exchange_weak(peak, used);) {
        }
        orange_.fetch_add(1, std::memory_order_relaxed);
        break;
      }
      // No slot, or the reader has it now: the writer waits for the read.
      release = false;
      if ((s & kRed) != 0) break;  // another thread already waits on it
      if (!st.compare_exchange_weak(s, static_cast<uint8_t>(s | kRed), std::memory_order_acq_rel)) continue;
      e->red_q.Push(static_cast<size_t>(i));
      red_.fetch_add(1, std::memory_order_release);  // after the push: a reader that sees it pops it
      red_wait_ns_.fetch_sub(t0, std::memory_order_relaxed);
      break;
    }
    if (slot != kNoSlot) e->spare = slot;
  }
  faults_.fetch_add(1, std::memory_order_relaxed);
  fault_ns_.fetch_add(NowNs() - t0, std::memory_order_relaxed);
  in_handler_.fetch_sub(1, std::memory_order_seq_cst);
  return release;
}

// The handler, after a watched page i was released: the other watched pages
// of i's watch group (watch_group_ pages, aligned in the address space so
// that a 2 MiB group is one huge page, within i's range) go too, numbered as
// i's first write. The order is learned per block, so a finer watch would
// only cost more faults; under checkpoint.changes = pages the group counts
// as written. Pages of the group in any other state (not read yet, copied)
// are not touched. Runs of released pages are one ioctl each (i's run
// includes i, which the caller releases again with its wake: one redundant
// ioctl per group).
void ZeroCopy::ReleaseWatchGroup(Epoch* e, size_t i) {
  if (watch_group_ <= 1) return;
  const size_t page = os::PageSize();
  const Epoch::Range& r = e->RangeOfPage(i);
  const uintptr_t a = r.start + (i - r.first_page) * page, span = watch_group_ * page;
  const uintptr_t from = std::max(r.start, a / span * span), to = std::min(r.start + r.bytes, a / span * span + span);
  const uint32_t number = e->first_write[i].load(std::memory_order_relaxed);
  // Every page is taken before any is released: a release wakes the writer,
  // which may then read the group's pages not read yet (in a test: on its
  // own thread) and so make them watched; taking those would release pages
  // nobody wrote.
  for (uintptr_t p = from; p < to; p += page) {
    const size_t k = r.first_page + (p - r.start) / page;
    uint8_t watched = kWatched;
    if (k == i || !e->state[k].compare_exchange_strong(watched, kDone, std::memory_order_seq_cst)) continue;
    uint32_t none = 0;
    e->first_write[k].compare_exchange_strong(none, number, std::memory_order_relaxed);
    if (e->collected.load(std::memory_order_seq_cst)) e->late[k].store(1, std::memory_order_relaxed);
  }
  // Then runs of done pages: taken above, or done before (released already,
  // or being released by the reader: once more changes nothing).
  uintptr_t run = 0;  // start of the current run of released pages, 0 = none
  for (uintptr_t p = from; p <= to; p += page) {
    const size_t k = r.first_page + (p - r.start) / page;
    const bool done = p < to && e->state[k].load(std::memory_order_seq_cst) == kDone;
    if (done && run == 0) run = p;
    if (!done && run != 0) {
      (void)wp_->Release(run, p - run);  // an error leaves the page to fault on its own
      run = 0;
    }
  }
}

Status ZeroCopy::Read(const void* src, void* dst, size_t n) {
  if (!in_epoch()) {
    // Copied pieces may come after the read of the last protected page,
    // which completes a watched epoch.
    size_t left = 0;
    const uint8_t* c = epoch_ != nullptr ? CopiedAt(reinterpret_cast<uintptr_t>(src), &left) : nullptr;
    if (c == nullptr || left < n) return Status::State("zero-copy: no epoch in progress");
    std::memcpy(dst, c, n);
    return Status::Ok();
  }
  SettleHistory();  // before the first Seen overwrites the record
  Epoch* e = epoch_.get();
  const size_t page = os::PageSize();
  const auto a = reinterpret_cast<uintptr_t>(src);
  auto* out = static_cast<uint8_t*>(dst);
  uintptr_t run_start = 0, run_end = 0;  // pages to release, contiguous
  Status status;
  auto flush_run = [&] {
    if (run_end > run_start) {
      Status s = wp_->Release(run_start, run_end - run_start);
      if (!s.ok() && status.ok()) status = s;
    }
    run_start = run_end = 0;
  };
  for (uintptr_t at = a; at < a + n;) {
    const uintptr_t pg = at / page * page;
    const uintptr_t piece_end = std::min<uintptr_t>(pg + page, a + n);
    const int64_t i = e->PageOf(pg);
    if (i < 0) {
      size_t left = 0;
      if (const uint8_t* c = CopiedAt(at, &left)) {  // a copied piece: no page state
        const size_t k = std::min<size_t>(left, a + n - at);
        std::memcpy(out + (at - a), c, k);
        at += k;
        continue;
      }
      flush_run();
      return Status::InvalidArgument("zero-copy: the bytes read are not protected memory of this epoch");
    }
    std::atomic<uint8_t>& st = e->state[static_cast<size_t>(i)];
    const bool last_piece = piece_end == pg + page;
    uint8_t s = st.load(std::memory_order_acquire);
    while ((s & kStateMask) == kProtected &&
           !st.compare_exchange_weak(s, static_cast<uint8_t>(kReading | (s & kRed)), std::memory_order_acq_rel)) {
    }
    while ((s & kStateMask) == kCowing) {  // the handler is copying it (one page)
      ::sched_yield();
      s = st.load(std::memory_order_acquire);
    }
    const uint8_t low = s & kStateMask;
    if (low == kProtected) {
      CopyStable(out + (at - a), reinterpret_cast<const void*>(at), piece_end - at);
      if (last_piece) {
        // Watching: a page nobody waits for stays protected until its
        // first write; a RED writer's page is released now.
        uint8_t old = st.load(std::memory_order_acquire);
        while (!st.compare_exchange_weak(old, (old & kRed) != 0 || !e->watch ? kDone : kWatched,
                                         std::memory_order_acq_rel)) {
        }
        const bool release = (old & kRed) != 0 || !e->watch;
        if ((old & kRed) != 0) {
          red_wait_ns_.fetch_add(NowNs(), std::memory_order_relaxed);
        } else {
          green_.fetch_add(1, std::memory_order_relaxed);
        }
        e->Seen(static_cast<size_t>(i), (old & kRed) != 0 ? PageColor::kRed : PageColor::kGreen);
        if (e->reads == e->to_read) Complete(e);
        if (release) {
          if (run_end != pg) flush_run();
          if (run_end == 0) run_start = pg;
          run_end = pg + page;
        }
      } else {
        // Not the page's last piece: back to protected (a writer that came
        // meanwhile stays RED until the last piece).
        uint8_t cur = st.load(std::memory_order_acquire);
        while (!st.compare_exchange_weak(cur, static_cast<uint8_t>(kProtected | (cur & kRed)),
                                         std::memory_order_acq_rel)) {
        }
      }
    } else if (low == kCowed) {
      const uint32_t slot = e->slot_of[static_cast<size_t>(i)];
      std::memcpy(out + (at - a), e->SlotData(slot) + (at - pg), piece_end - at);
      if (last_piece) {
        st.store(kDone, std::memory_order_release);
        e->Seen(static_cast<size_t>(i), PageColor::kOrange);
        if (e->reads == e->to_read) Complete(e);
        e->cow_used.fetch_sub(1, std::memory_order_relaxed);
        e->GiveSlot(slot);
      }
    } else {
      flush_run();
      return Status::InvalidArgument("zero-copy: page at offset " + std::to_string(pg - a) +
                                     " of the read was already read in this epoch, or is not protected");
    }
    at = piece_end;
  }
  flush_run();
  return status;
}

const uint8_t* ZeroCopy::CopiedAt(uintptr_t a, size_t* left) const {
  auto it = std::upper_bound(copied_.begin(), copied_.end(), a,
                             [](uintptr_t x, const Copied& c) { return x < c.start; });
  if (it == copied_.begin()) return nullptr;
  --it;
  if (a >= it->start + it->bytes) return nullptr;
  *left = it->start + it->bytes - a;
  return copied_bytes_.data() + it->at + (a - it->start);
}

void ZeroCopy::End() {
  if (!in_epoch()) return;
  Epoch* e = epoch_.get();
  // Read completes a watched epoch at its last page; here only one that
  // stores no page at all (nothing to read) is complete.
  if (e->watch && e->reads == e->to_read) {
    Complete(e);
    return;
  }
  Finish(/*keep_registered=*/false);
  Tidy();
}

// Watching: the version is complete once its last page is read, before the
// reader hands that block on (its commit may follow at once, and the
// application's next first writes must count as BLUE); in_epoch() is false
// from now on.
void ZeroCopy::Complete(Epoch* e) {
  if (!e->watch) return;
  e->completed_at.store(e->write_seq.load(std::memory_order_relaxed), std::memory_order_relaxed);
  e->completed.store(true, std::memory_order_release);
}

void ZeroCopy::StopWatching() {
  if (!epoch_ || !epoch_->completed.load(std::memory_order_relaxed)) return;
  Finish(/*keep_registered=*/false);
  Tidy();
}

// Handlers count themselves in in_handler_ (seq_cst) around their look at
// live_, so once it reads 0 after a store to live_, every handler that could
// have seen the old value has left: the epoch's state is the caller's. A
// spin, not a wait: OnFault holds no lock and never waits (a RED writer
// waits after it returned), so it leaves within microseconds.
void ZeroCopy::WaitForHandlers() const {
  while (in_handler_.load(std::memory_order_seq_cst) != 0) ::sched_yield();
}

// Begin, once e is live: handlers that saw no epoch are done (in_handler_),
// and their pages are reported written at the next Written. Without this a
// write from another thread during the checkpoint call, after the version's
// Written looked and before the new protection, would be in neither this
// version (correct: it raced the call) nor the next one (lost).
void ZeroCopy::TakeOrphans(Epoch* e) {
  WaitForHandlers();
  const uint32_t n = orphan_count_.exchange(0, std::memory_order_relaxed);
  if (n > kOrphans) {
    std::fill(e->carry.begin(), e->carry.end(), 1);
    e->carried = true;
    return;
  }
  for (uint32_t k = 0; k < n; ++k) e->CarryAt(orphans_[k].load(std::memory_order_relaxed));
}

// Off the checkpoint call (End on the reader, StopWatching): what the epoch
// saw is learned and the spare made ready now, not at the next Begin.
void ZeroCopy::Tidy() {
  SettleHistory();
  if (spare_ && std::exchange(spare_dirty_, false)) spare_->Reset(/*keep_seen=*/false);
}

// The record Finish left (seen_owner_->seen) becomes history() and is
// cleared for the epoch that reuses it. A Finish at Begin (a watched epoch)
// leaves it to the reader: ranking 1 GiB of pages is 4-8 ms, which the
// checkpoint call would otherwise pay.
void ZeroCopy::SettleHistory() {
  if (!std::exchange(history_pending_, false)) return;
  history_.Learn(std::move(pending_ranges_), seen_owner_->seen, os::PageSize());
  std::fill(seen_owner_->seen.begin(), seen_owner_->seen.end(), PageSeen{});
  pending_ranges_ = {};
}

const FlushHistory& ZeroCopy::history() {
  SettleHistory();
  return history_;
}

void ZeroCopy::Finish(bool keep_registered) {
  SettleHistory();  // the last record, if no Read took it (an epoch with nothing to read)
  Epoch* e = epoch_.get();
  // Writers still waiting (only when pages were left unread: an error) go on.
  const int64_t now = NowNs();
  for (auto& st : e->state) {
    if ((st.load(std::memory_order_acquire) & kRed) != 0) red_wait_ns_.fetch_add(now, std::memory_order_relaxed);
  }
  if (!keep_registered) {
    for (const auto& r : e->registered) (void)wp_->Unregister(reinterpret_cast<void*>(r.start), r.bytes);
  }
  live_.store(nullptr, std::memory_order_seq_cst);
  WaitForHandlers();
  // What this epoch saw orders the next one. Watched: a page read before any
  // write is GREEN if first written before End, BLUE after, and has no color
  // if it was not written at all; unwatched, every page read from memory is
  // GREEN (its first write was not seen).
  const bool watched = e->completed.load(std::memory_order_relaxed);
  const uint32_t completed_at = e->completed_at.load(std::memory_order_relaxed);
  for (size_t i = 0; i < e->seen.size(); ++i) {
    PageSeen& p = e->seen[i];
    p.first_write = e->first_write[i].load(std::memory_order_relaxed);
    if (e->late[i].load(std::memory_order_relaxed) != 0) late_pages_.push_back(e->AddressOf(i));
    // Watched pages outside the version's extents were never read (kNone).
    if (watched && (p.color == PageColor::kGreen || p.color == PageColor::kNone)) {
      if (p.first_write == 0) p.color = PageColor::kNone;
      else if (p.first_write - 1 >= completed_at) p.color = PageColor::kBlue;
      else p.color = PageColor::kGreen;
    }
  }
  pending_ranges_.clear();
  for (const auto& r : e->ranges) pending_ranges_.push_back({r.start, r.bytes, r.first_page});
  history_pending_ = true;
  seen_owner_ = e;
  prior_traps_ = last_traps_;
  last_traps_ = red_.load(std::memory_order_relaxed) + orange_.load(std::memory_order_relaxed) - e->traps_before;
  spare_ = std::move(epoch_);  // the next Begin reuses its arrays
  spare_dirty_ = true;
}

Result<ExtentList> ZeroCopy::Written(const void* data, size_t bytes) {
  if (!watching()) {
    return Status::Unsupported("zero-copy: first writes are not watched now (no epoch yet, the watch ended at a "
                               "restore or pop, or protection is by mprotect)");
  }
  Epoch* e = epoch_.get();
  const auto start = reinterpret_cast<uintptr_t>(data);
  auto r = std::find_if(e->ranges.begin(), e->ranges.end(), [&](const Epoch::Range& x) { return x.start == start; });
  if (r == e->ranges.end() || r->bytes != bytes) {
    return Status::Unsupported("zero-copy: this region was not part of the last epoch (new, moved or resized)");
  }
  e->collected.store(true, std::memory_order_seq_cst);  // before the states: see the top of the file
  const size_t page = os::PageSize();
  ExtentList out;
  for (size_t p = 0; p < bytes / page; ++p) {
    const size_t i = r->first_page + p;
    if ((e->state[i].load(std::memory_order_seq_cst) & kStateMask) != kWatched || e->carry[i] != 0) {
      AppendExtent(out, p * page, page);
    }
  }
  return out;
}

bool ZeroCopy::in_epoch() const { return epoch_ != nullptr && !epoch_->completed.load(std::memory_order_relaxed); }

bool ZeroCopy::watching() const { return epoch_ != nullptr && epoch_->completed.load(std::memory_order_relaxed); }

int64_t ZeroCopy::PageIndex(uintptr_t a) const { return in_epoch() ? epoch_->PageOf(a) : -1; }

size_t ZeroCopy::pages() const { return in_epoch() ? epoch_->state.size() : 0; }

int64_t ZeroCopy::NextRedPage() { return in_epoch() ? epoch_->red_q.Pop() : -1; }

bool ZeroCopy::RedQueued() const { return in_epoch() && epoch_->red_q.Queued(); }

int64_t ZeroCopy::NextOrangePage() { return in_epoch() ? epoch_->orange_q.Pop() : -1; }

bool ZeroCopy::CowOverHalf() const {
  return in_epoch() && 2 * epoch_->cow_used.load(std::memory_order_relaxed) > epoch_->slots;
}

bool ZeroCopy::CowHalfFullOrNone() const {
  return in_epoch() && 2 * epoch_->cow_used.load(std::memory_order_relaxed) >= epoch_->slots;
}

ZeroCopyCounters ZeroCopy::counters() const {
  ZeroCopyCounters c;
  c.epochs = epochs_.load(std::memory_order_relaxed);
  c.protected_bytes = protected_bytes_.load(std::memory_order_relaxed);
  c.cow_bytes = cow_bytes_.load(std::memory_order_relaxed);
  c.cow_peak_bytes = cow_peak_.load(std::memory_order_relaxed);
  c.red = red_.load(std::memory_order_acquire);
  c.orange = orange_.load(std::memory_order_relaxed);
  c.green = green_.load(std::memory_order_relaxed);
  c.faults = faults_.load(std::memory_order_relaxed);
  c.blue = blue_.load(std::memory_order_relaxed);
  c.watch_faults = watch_faults_.load(std::memory_order_relaxed);
  // Exact between epochs; during one, waits in progress are left out.
  c.red_wait_s = static_cast<double>(std::max<int64_t>(0, red_wait_ns_.load(std::memory_order_relaxed))) * 1e-9;
  c.fault_s = static_cast<double>(fault_ns_.load(std::memory_order_relaxed)) * 1e-9;
  return c;
}

}  // namespace cairn::core
