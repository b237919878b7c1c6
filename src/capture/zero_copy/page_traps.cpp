// The two sides of a zero-copy epoch that move a page's state
// (capture/zero_copy/zero_copy.hpp; the states are drawn at the top of
// zero_copy.cpp): OnFault, on the write-protection handler (or a writer's
// SIGSEGV handler), and Read, on the capture's reader.
#include <sched.h>

#include <algorithm>

#include "capture/zero_copy/epoch.hpp"
#include "capture/zero_copy/zero_copy.hpp"
#include "os/protect/write_protect.hpp"

namespace cairn::core {

using namespace zc;  // NOLINT(google-build-using-namespace): the page states

// The handler thread: decides by the page's state (the drawing at the top of
// zero_copy.cpp).
bool ZeroCopy::OnFault(uintptr_t addr) {
  in_handler_.fetch_add(1, std::memory_order_seq_cst);
  const int64_t t0 = NowNs();
  if (auto* hook = hook_.load(std::memory_order_acquire))
    hook(hook_arg_.load(std::memory_order_relaxed));
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
        if (e->collected.load(std::memory_order_seq_cst))
          e->late[static_cast<size_t>(i)].store(1, std::memory_order_relaxed);
        watch_faults_.fetch_add(1, std::memory_order_relaxed);
        if (e->completed.load(std::memory_order_acquire))
          blue_.fetch_add(1, std::memory_order_relaxed);
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
        const uint64_t used =
            (e->cow_used.fetch_add(1, std::memory_order_relaxed) + 1) * os::PageSize();
        for (uint64_t peak = cow_peak_.load();
             used > peak && !cow_peak_.compare_exchange_weak(peak, used);) {
        }
        orange_.fetch_add(1, std::memory_order_relaxed);
        break;
      }
      // No slot, or the reader has it now: the writer waits for the read.
      release = false;
      if ((s & kRed) != 0) break;  // another thread already waits on it
      if (!st.compare_exchange_weak(s, static_cast<uint8_t>(s | kRed), std::memory_order_acq_rel))
        continue;
      e->red_q.Push(static_cast<size_t>(i));
      red_.fetch_add(1,
                     std::memory_order_release);  // after the push: a reader that sees it pops it
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
  const uintptr_t from = std::max(r.start, a / span * span),
                  to = std::min(r.start + r.bytes, a / span * span + span);
  const uint32_t number = e->first_write[i].load(std::memory_order_relaxed);
  // Every page is taken before any is released: a release wakes the writer,
  // which may then read the group's pages not read yet (in a test: on its
  // own thread) and so make them watched; taking those would release pages
  // nobody wrote.
  for (uintptr_t p = from; p < to; p += page) {
    const size_t k = r.first_page + (p - r.start) / page;
    uint8_t watched = kWatched;
    if (k == i || !e->state[k].compare_exchange_strong(watched, kDone, std::memory_order_seq_cst))
      continue;
    uint32_t none = 0;
    e->first_write[k].compare_exchange_strong(none, number, std::memory_order_relaxed);
    if (e->collected.load(std::memory_order_seq_cst))
      e->late[k].store(1, std::memory_order_relaxed);
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
    const uint8_t* c =
        epoch_ != nullptr ? CopiedAt(reinterpret_cast<uintptr_t>(src), &left) : nullptr;
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
      return Status::InvalidArgument(
          "zero-copy: the bytes read are not protected memory of this epoch");
    }
    bool release = false;
    if (!ReadPiece(e, static_cast<size_t>(i), pg, at, piece_end, out + (at - a), &release)) {
      flush_run();
      return Status::InvalidArgument(
          "zero-copy: page at offset " + std::to_string(pg - a) +
          " of the read was already read in this epoch, or is not protected");
    }
    if (release) {
      if (run_end != pg) flush_run();
      if (run_end == 0) run_start = pg;
      run_end = pg + page;
    }
    at = piece_end;
  }
  flush_run();
  return status;
}

// Piece [at, piece_end) of page i (at pg) into out, by the page's state:
// from memory while it is protected (the state kReading meanwhile, so the
// handler copies nothing), or from its COW slot. The piece that ends the
// page finishes it: *release when its protection goes now (a RED writer
// waits, or no watch). False: the page was read already, or is not
// protected.
bool ZeroCopy::ReadPiece(Epoch* e, size_t i, uintptr_t pg, uintptr_t at, uintptr_t piece_end,
                         uint8_t* out, bool* release) {
  const size_t page = os::PageSize();
  std::atomic<uint8_t>& st = e->state[i];
  const bool last_piece = piece_end == pg + page;
  uint8_t s = st.load(std::memory_order_acquire);
  while ((s & kStateMask) == kProtected &&
         !st.compare_exchange_weak(s, static_cast<uint8_t>(kReading | (s & kRed)),
                                   std::memory_order_acq_rel)) {
  }
  while ((s & kStateMask) == kCowing) {  // the handler is copying it (one page)
    ::sched_yield();
    s = st.load(std::memory_order_acquire);
  }
  const uint8_t low = s & kStateMask;
  if (low == kProtected) {
    CopyStable(out, reinterpret_cast<const void*>(at), piece_end - at);
    if (!last_piece) {
      // Back to protected (a writer that came meanwhile stays RED until the
      // last piece).
      uint8_t cur = st.load(std::memory_order_acquire);
      while (!st.compare_exchange_weak(cur, static_cast<uint8_t>(kProtected | (cur & kRed)),
                                       std::memory_order_acq_rel)) {
      }
      return true;
    }
    // Watching: a page nobody waits for stays protected until its first
    // write; a RED writer's page is released now.
    uint8_t old = st.load(std::memory_order_acquire);
    while (!st.compare_exchange_weak(old, (old & kRed) != 0 || !e->watch ? kDone : kWatched,
                                     std::memory_order_acq_rel)) {
    }
    *release = (old & kRed) != 0 || !e->watch;
    if ((old & kRed) != 0) {
      red_wait_ns_.fetch_add(NowNs(), std::memory_order_relaxed);
    } else {
      green_.fetch_add(1, std::memory_order_relaxed);
    }
    e->Seen(i, (old & kRed) != 0 ? PageColor::kRed : PageColor::kGreen);
    if (e->reads == e->to_read) Complete(e);
    return true;
  }
  if (low != kCowed) return false;
  const uint32_t slot = e->slot_of[i];
  std::memcpy(out, e->SlotData(slot) + (at - pg), piece_end - at);
  if (last_piece) {
    st.store(kDone, std::memory_order_release);
    e->Seen(i, PageColor::kOrange);
    if (e->reads == e->to_read) Complete(e);
    e->cow_used.fetch_sub(1, std::memory_order_relaxed);
    e->GiveSlot(slot);
  }
  return true;
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

}  // namespace cairn::core
