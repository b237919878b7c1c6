// Zero-copy capture epochs (capture/zero_copy/zero_copy.hpp): their
// lifecycle (Create, Begin, End, the watch, Written). An epoch's state is
// epoch.hpp; the fault handler and the reader, which move a page's state,
// are page_traps.cpp.
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
#include <string>

#include "capture/zero_copy/epoch.hpp"
#include "os/protect/write_protect.hpp"

namespace cairn::core {

using namespace zc;  // NOLINT(google-build-using-namespace): the page states

uint64_t ZeroCopy::CowBytes(double cow_fraction, uint64_t protected_bytes) {
  if (!(cow_fraction > 0)) return 0;
  const uint64_t page = os::PageSize();
  auto want = static_cast<uint64_t>(cow_fraction * static_cast<double>(protected_bytes));
  want = (want + page - 1) / page * page;
  return std::min(std::max(want, kMinCowPages * page), kMaxCowBytes);
}

ZeroCopy::ZeroCopy(double cow_fraction) : cow_fraction_(cow_fraction) {}

Result<std::unique_ptr<ZeroCopy>> ZeroCopy::Create(double cow_fraction, WriteProtectMode mode,
                                                   bool watch, size_t watch_group, bool learn) {
  auto z = CreateUnwatched(cow_fraction, mode);
  // mprotect: each page released singly splits the mapping (VMAs), so a
  // watch over many pages written in random order would run into
  // vm.max_map_count; only userfaultfd watches.
  if (z.ok()) {
    (*z)->watch_ = watch && (*z)->mechanism() == os::WpMechanism::kUserfaultfd;
    (*z)->watch_group_ = std::max<size_t>(watch_group, 1);
    (*z)->learn_ = learn;
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
  TakeCopied(copied);
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
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<Epoch> e, MakeEpoch(pages, cow_bytes));
  SetPageStates(e.get(), sorted);
  epoch_ = std::move(e);
  live_.store(epoch_.get(), std::memory_order_seq_cst);
  TakeOrphans(epoch_.get());
  if (Status s = ProtectRanges(sorted, keep); !s.ok()) {
    End();
    return s;
  }
  epochs_.fetch_add(1, std::memory_order_relaxed);
  protected_bytes_.fetch_add(protect_bytes, std::memory_order_relaxed);
  cow_bytes_.store(cow_bytes, std::memory_order_relaxed);
  return Status::Ok();
}

// The bytes on no protected page are taken now, as a copy capture would.
void ZeroCopy::TakeCopied(const std::vector<ZeroCopyPiece>& copied) {
  copied_.clear();
  size_t copied_total = 0;
  for (const ZeroCopyPiece& p : copied) {
    if (p.bytes == 0) continue;
    copied_.push_back({reinterpret_cast<uintptr_t>(p.data), p.bytes, copied_total});
    copied_total += p.bytes;
  }
  copied_bytes_.resize(copied_total);
  for (const Copied& c : copied_)
    std::memcpy(copied_bytes_.data() + c.at, reinterpret_cast<const void*>(c.start), c.bytes);
  std::sort(copied_.begin(), copied_.end(),
            [](const Copied& a, const Copied& b) { return a.start < b.start; });
}

Result<std::unique_ptr<ZeroCopy::Epoch>> ZeroCopy::MakeEpoch(size_t pages, uint64_t cow_bytes) {
  const size_t page = os::PageSize();
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
  // An epoch planned by address (the learned order's fallback, as of the
  // epochs learned so far: a watched epoch's record is learned by the reader,
  // after this) watches only for the written pages.
  e->address = history_.PrefersAddressOrder();
  e->watch = watch_ && (watch_group_ <= 1 || (!e->address && last_traps_ > pages / watch_group_ &&
                                              2 * last_traps_ > 3 * prior_traps_));
  e->traps_before = red_.load(std::memory_order_relaxed) + orange_.load(std::memory_order_relaxed);
  return e;
}

// States first, then the handler may see the epoch (Begin), then protection.
void ZeroCopy::SetPageStates(Epoch* e, const std::vector<ZeroCopyRange>& sorted) {
  const size_t page = os::PageSize();
  size_t first = 0;
  for (const auto& r : sorted) {
    e->ranges.push_back(Epoch::Range{reinterpret_cast<uintptr_t>(r.data), r.bytes, first});
    first += r.bytes / page;
  }
  // Pages written after the last Written looked are reported again.
  for (const uintptr_t a : late_pages_) e->CarryAt(a);
  late_pages_.clear();
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
}

Status ZeroCopy::ProtectRanges(const std::vector<ZeroCopyRange>& sorted, bool keep) {
  const size_t page = os::PageSize();
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (!keep) CAIRN_RETURN_IF_ERROR(wp_->Register(sorted[i].data, sorted[i].bytes));
    epoch_->registered.push_back(epoch_->ranges[i]);
    const ExtentList whole{Extent{0, sorted[i].bytes}};
    for (const Extent& x : sorted[i].extents.empty() || epoch_->watch ? whole : sorted[i].extents) {
      const uint64_t from = x.offset / page * page;
      const uint64_t to = (x.end() + page - 1) / page * page;
      CAIRN_RETURN_IF_ERROR(
          wp_->Protect(reinterpret_cast<uintptr_t>(sorted[i].data) + from, to - from));
    }
  }
  return Status::Ok();
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
  if (learn_)
    history_.Learn(std::move(pending_ranges_), seen_owner_->seen, os::PageSize(), pending_address_);
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
  pending_address_ = e->address;
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

bool ZeroCopy::address_epoch() const { return epoch_ != nullptr && epoch_->address; }

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
