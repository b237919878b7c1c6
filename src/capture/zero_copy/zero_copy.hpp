// Zero-copy capture epochs (checkpoint.capture = zero-copy; docs/design.md,
// "Zero-copy captures"): the memory of a version is write-protected at the
// checkpoint call and read later, off the application thread, as it was at
// that call. A first write by the application to a page not read yet is
// trapped: the page is copied into a preallocated copy-on-write slot and
// released (ORANGE), or, with no slot free, the writer waits until the page
// is read (RED). Pages read before any write are GREEN.
//
// Watching (Create's `watch`, userfaultfd only): a page read before any write
// stays protected until its first write, which is numbered (GREEN during the
// epoch, BLUE after End) and released together with the watched pages of
// its watch group (Create's watch_group pages, aligned: the order is learned
// per block, and a 2 MiB group keeps a huge page whole), which take its
// number; End keeps the watch until the next Begin or StopWatching, so the
// next epoch's order knows every group's first write, and groups with no
// write at all rank last. With groups of more than a page an epoch watches
// only when the last epoch trapped more first writes (RED + ORANGE) than it
// has groups, and more than 1.5x the epoch before it: once the order leaves
// little to learn, or the traps are noise no order predicts, the watch is
// not paid. Cost: one more fault per group first-written after its read
// (watch_faults), and no release ioctl for pages read before their write.
//
// One epoch at a time: Begin (protects), Read (any number, one reader
// thread), End (removes what protection is left; watching, it stays on pages
// not written yet until the next Begin or StopWatching). The fault handler runs on
// os::WriteProtect's owned thread and touches only preallocated state (it
// may run in a signal handler too: lock-free, no allocation). It numbers the
// first trapped write of each page and queues pages that go RED or ORANGE,
// so the reader can take them first (NextUrgentPage); End keeps what the
// epoch saw for the next epoch's order (history(); capture/zero_copy/flush_order.hpp).
//
// Thread safety: Begin, Read, End and the destructor from one thread at a time
// (the capture's), counters() from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cairn/config.hpp"
#include "cairn/status.hpp"
#include "capture/zero_copy/flush_order.hpp"
#include "os/mem/memory.hpp"
#include "util/extent.hpp"

namespace cairn::os {
class WriteProtect;
enum class WpMechanism : uint8_t;
}

namespace cairn::core {

// One region of an epoch: page-aligned host memory, and the extents of it
// that the version stores (empty: all of it). Only those are protected.
struct ZeroCopyRange {
  uint8_t* data = nullptr;
  size_t bytes = 0;
  ExtentList extents;
};

// Bytes of an epoch that are not on protected pages (the partial pages at
// the ends of a region that is not page-aligned, e.g. a Python or torch
// allocation): Begin copies them, Read serves them from that copy.
struct ZeroCopyPiece {
  const uint8_t* data = nullptr;
  size_t bytes = 0;
};

// Totals over the engine's epochs (stats: zero_copy_*).
struct ZeroCopyCounters {
  uint64_t epochs = 0;
  uint64_t protected_bytes = 0;  // summed over epochs
  uint64_t cow_bytes = 0;        // the last epoch's COW buffer
  uint64_t cow_peak_bytes = 0;   // most COW bytes in use at once
  uint64_t red = 0;              // first writes that waited for the page's read
  uint64_t orange = 0;           // first writes copied into the COW buffer
  uint64_t green = 0;            // pages read before any write
  uint64_t blue = 0;             // first writes after the epoch's end (watching only)
  uint64_t watch_faults = 0;     // first writes trapped after their page's read (watching: GREEN + BLUE)
  uint64_t faults = 0;           // write faults handled
  double red_wait_s = 0;         // application time blocked in RED faults
  double fault_s = 0;            // handler time spent on faults
};

class ZeroCopy {
 public:
  // The COW buffer of an epoch: cow_fraction of its protected bytes, at
  // least kMinCowPages pages (none when cow_fraction is 0), at most kMaxCowBytes.
  static constexpr size_t kMinCowPages = 16;
  static constexpr uint64_t kMaxCowBytes = uint64_t{1} << 30;
  static uint64_t CowBytes(double cow_fraction, uint64_t protected_bytes);
  // Bookkeeping per page of an epoch's ranges, at most: state, slot, first
  // write, two queue entries, what was seen, the reader's block map, the
  // rank kept for the next epoch and the late/carry marks of the watch (the
  // extra memory besides the COW buffer).
  static constexpr size_t kMetadataBytesPerPage = 1 + 4 + 4 + 8 + sizeof(PageSeen) + 4 + 4 + 2;

  // Write protection by `mode` (kAuto: userfaultfd, else mprotect, and
  // wp_note() says why userfaultfd was skipped). kUnsupported with the
  // reasons when no allowed mechanism works here (the caller copies instead).
  // watch: keep read pages protected until their first write (see the top;
  // ignored with mprotect).
  // watch_group: pages released together by one watched first write (see
  // the top; >= 1).
  // learn: each epoch's record becomes history() for the learned order;
  // false (address order) skips ranking and scoring its pages, which
  // nobody would read.
  static Result<std::unique_ptr<ZeroCopy>> Create(double cow_fraction,
                                                  WriteProtectMode mode = WriteProtectMode::kAuto,
                                                  bool watch = false, size_t watch_group = 1,
                                                  bool learn = true);
  ~ZeroCopy();  // ends an epoch in progress: no protection is left behind
  ZeroCopy(const ZeroCopy&) = delete;
  ZeroCopy& operator=(const ZeroCopy&) = delete;

  // Starts an epoch: allocates the COW slots, registers and protects the
  // ranges' extents and copies the `copied` pieces (which must not overlap
  // the ranges). kState when an epoch is in progress; kUnsupported when a
  // range cannot be protected (nothing is left protected then).
  // A watch left by the last epoch ends first (StopWatching).
  Status Begin(const std::vector<ZeroCopyRange>& ranges, const std::vector<ZeroCopyPiece>& copied = {});
  // Between Begin and End; watching, only until the Read of its last page
  // (the version is complete then: first writes from there on are BLUE).
  bool in_epoch() const;
  // After End, watching: pages not written since their read are protected.
  bool watching() const;
  // The epoch in progress falls back to address order (a learned-order
  // reader plans by address: ZeroCopyOrder): the learned ranks did not
  // foretell the last epochs' first writes better than address order
  // (FlushHistory::PrefersAddressOrder, as of Begin). Such an epoch is not
  // watched (unless for the written pages: watch_group 1), as under
  // checkpoint.zero_copy_order = address.
  bool address_epoch() const;
  // Copies [src, src + n) as it was at Begin into dst. src lies in
  // protected extents and copied pieces; pieces come in increasing order
  // within a page, and a page is done (its protection removed, its slot
  // freed) by the piece that reaches its end. kInvalidArgument when src is
  // neither protected memory of the epoch nor a copied piece, or was
  // already read.
  Status Read(const void* src, void* dst, size_t n);
  // Ends the epoch: every protection is removed (blocked writers go on), the
  // COW buffer is freed. Watching, once every page was read: pages not
  // written yet stay protected, and their first writes are BLUE, until
  // StopWatching or the next Begin.
  void End();
  // Ends a watch: every protection is removed, and what the epoch saw
  // becomes history(). Nothing when not watching.
  void StopWatching();
  // Watching: the page-aligned extents of region [data, data + bytes) (a
  // range of the last epoch) written since that epoch's Begin, for
  // checkpoint.changes = pages; a write from now on is reported again by
  // the next epoch's Written. kUnsupported (naming why) when not watching or
  // the region was not a range of the epoch: nothing is known.
  Result<ExtentList> Written(const void* data, size_t bytes);

  // The reader's (during an epoch): the epoch's page index of the page at
  // page-aligned address a, or -1; the number of pages of the epoch's ranges.
  int64_t PageIndex(uintptr_t a) const;
  size_t pages() const;
  // The reader's: the next page whose first write waits for its read (RED),
  // or the next one copied into a slot (ORANGE), in the order the handler
  // trapped them; -1 when none is queued. A page may already be read.
  int64_t NextRedPage();
  bool RedQueued() const;  // NextRedPage has a page (or one is being queued)
  int64_t NextOrangePage();
  // During an epoch: whether more than half of its COW slots hold pages.
  bool CowOverHalf() const;
  bool CowHalfFullOrNone() const;  // at least half of them, or there are none
  // What the last finished epoch saw (the capture thread's: between epochs,
  // or the reader's before its first Read; watching, it is complete once the
  // watch ends). The first call after a watch ended at Begin ranks it.
  const FlushHistory& history();

  ZeroCopyCounters counters() const;
  // The mechanism in use, and why kAuto did not get userfaultfd ("" if it did).
  os::WpMechanism mechanism() const;
  const std::string& wp_note() const { return wp_note_; }

  // Tests: called by the handler before it decides on a fault (the test may
  // block in it to force an interleaving). Set before Begin.
  void set_fault_hook_for_test(void (*hook)(void*), void* arg) {
    hook_arg_.store(arg, std::memory_order_relaxed);
    hook_.store(hook, std::memory_order_release);
  }
  // Tests: called by Begin between ending the last epoch's watch and the
  // new epoch going live (no epoch is live then).
  void set_between_epochs_hook_for_test(void (*hook)(void*), void* arg) {
    between_hook_ = hook;
    between_arg_ = arg;
  }

 private:
  struct Epoch;
  explicit ZeroCopy(double cow_fraction);
  static Result<std::unique_ptr<ZeroCopy>> CreateUnwatched(double cow_fraction, WriteProtectMode mode);
  bool OnFault(uintptr_t page);  // the handler thread
  void ReleaseWatchGroup(Epoch* e, size_t page_index);  // the handler thread
  void Complete(Epoch* e);                              // the reader, watching
  // The reader (Read): one piece of page i, which starts at pg (page_traps.cpp).
  bool ReadPiece(Epoch* e, size_t i, uintptr_t pg, uintptr_t at, uintptr_t piece_end, uint8_t* out,
                 bool* release);
  void SettleHistory();
  void Tidy();
  void WaitForHandlers() const;  // until no fault handler runs (zero_copy.cpp says why it suffices)
  void TakeOrphans(Epoch* e);
  // Begin's steps: the bytes on no protected page, copied now; the epoch
  // for `pages` pages and a COW buffer of cow_bytes (the spare, when it
  // fits); its ranges and page states; the ranges' protection (keep: they
  // are registered already).
  void TakeCopied(const std::vector<ZeroCopyPiece>& copied);
  Result<std::unique_ptr<Epoch>> MakeEpoch(size_t pages, uint64_t cow_bytes);
  void SetPageStates(Epoch* e, const std::vector<ZeroCopyRange>& sorted);
  Status ProtectRanges(const std::vector<ZeroCopyRange>& sorted, bool keep);
  // Removes every protection (keep_registered: the registration of the
  // epoch's ranges stays, for the next Begin of the same ranges), learns the
  // history.
  void Finish(bool keep_registered);
  void AddWait(int64_t ns);
  // The copy of the piece holding address a, and the bytes of it from a on;
  // null when no copied piece holds a.
  const uint8_t* CopiedAt(uintptr_t a, size_t* left) const;

  const double cow_fraction_;
  bool watch_ = false;  // set by Create
  bool learn_ = true;   // set by Create
  size_t watch_group_ = 1;  // set by Create
  uint64_t last_traps_ = 0;   // the capture thread's: RED + ORANGE of the last finished epoch
  uint64_t prior_traps_ = 0;  // the capture thread's: the same of the epoch before it
  std::unique_ptr<os::WriteProtect> wp_;
  std::string wp_note_;
  std::unique_ptr<Epoch> epoch_;          // the capture thread's
  std::unique_ptr<Epoch> spare_;          // the capture thread's: the last finished epoch, reused
  bool spare_dirty_ = false;              // spare_ needs its Reset
  // Finish's record of the epoch (seen_owner_->seen, pending_ranges_), not
  // learned into history_ yet (SettleHistory). seen_owner_ is epoch_ or
  // spare_: every path that drops an epoch settles first.
  bool history_pending_ = false;
  Epoch* seen_owner_ = nullptr;
  std::vector<FlushHistory::Range> pending_ranges_;
  bool pending_address_ = false;          // that epoch was planned by address (not scored)
  os::Mapping cow_;                       // the COW slots of every epoch (grows, kept)
  std::atomic<Epoch*> live_{nullptr};     // the handler's view of epoch_
  std::atomic<int> in_handler_{0};
  std::atomic<void (*)(void*)> hook_{nullptr};  // atomic: set while the handler runs
  std::atomic<void*> hook_arg_{nullptr};
  FlushHistory history_;  // the capture thread's
  std::vector<uintptr_t> late_pages_;  // the capture thread's: late writes of the finished epoch
  // Begin's copies of the copied pieces: written by Begin (the capture
  // thread), then only read by Read until the next Begin.
  struct Copied {
    uintptr_t start = 0;
    size_t bytes = 0;
    size_t at = 0;  // offset in copied_bytes_
  };
  std::vector<Copied> copied_;  // sorted by start
  std::vector<uint8_t> copied_bytes_;
  // First writes the handler released while no epoch was live: in Begin,
  // between the watch's Finish (the ranges stay registered, watched pages
  // protected) and the new epoch. Begin reports them written at the next
  // Written (carry), or every page when more than kOrphans came.
  static constexpr size_t kOrphans = 256;
  std::array<std::atomic<uintptr_t>, kOrphans> orphans_{};
  std::atomic<uint32_t> orphan_count_{0};
  void (*between_hook_)(void*) = nullptr;
  void* between_arg_ = nullptr;

  std::atomic<uint64_t> epochs_{0}, protected_bytes_{0}, cow_bytes_{0}, cow_peak_{0};
  std::atomic<uint64_t> red_{0}, orange_{0}, green_{0}, blue_{0}, watch_faults_{0}, faults_{0};
  std::atomic<int64_t> red_wait_ns_{0}, fault_ns_{0};
};

}  // namespace cairn::core
