// The room a capture takes in the host cache (capture.hpp): a chunk for
// each block, waiting when there is none (the application's blocking);
// room kept for the device mover's drains; and a zero-copy reader's room
// for its next block, with spares for pages that go RED.
#include <chrono>
#include <optional>
#include <utility>
#include <vector>

#include "capture/zero_copy/zero_copy_order.hpp"
#include "engine/capture.hpp"

namespace cairn::core {

int32_t Pipeline::Capturer::AcquireChunk(uint32_t write_bytes, bool* was_touched, int node) {
  for (;;) {
    if (auto c = p_->TakeChunk(write_bytes, was_touched, node)) return static_cast<int32_t>(*c);
    // Back-pressure: every chunk holds data not yet flushed (or pinned).
    p_->WaitAsCaptureBlocked("blocked: cache full");
  }
}

// While device blocks wait to be drained, a capture into the host cache may
// not take the last chunk the device mover could get (free, or evictable
// because written): the flusher may be waiting for those device blocks
// before it can write, and so free, anything the capture holds.
bool Pipeline::Capturer::DrainRoomAfterTaking(const Entry& capturing) const {
  if (!p_->device_mover_.DrainsPending()) return true;
  return p_->store_.HasRoomFor(capturing, 2);
}

void Pipeline::Capturer::WaitForDrainRoom(const Entry& capturing) {
  while (!DrainRoomAfterTaking(capturing)) {
    if (!p_->store_.ReleaseOldestHold())
      p_->WaitAsCaptureBlocked("blocked: host cache kept for drains");
  }
}

double Pipeline::Capturer::CaptureBlockedSeconds() const {
  return p_->stats_.capture_blocked_s + p_->stats_.device.capture_blocked_s;
}

void Pipeline::Capturer::FreeHeld(std::vector<HeldChunk>* held) {
  for (const HeldChunk& h : *held) p_->store_.Free(static_cast<uint32_t>(h.chunk));
  if (!held->empty()) p_->cv_app_.notify_all();
  held->clear();
}

// Why spares (docs/design.md "Room for RED pages"): the reader waits for the
// flusher to free a chunk most of the time, and chunks come free in bursts,
// so a RED page's writer waited 0.5-1 ms before its block could be read at
// all. With a spare it waits about kRedPoll plus one block's read. Spares
// slow the flush (it has fewer chunks), so they are kept only while a page
// can go RED soon (ZeroCopyOrder::WantsSpares: the learned order with no
// COW slot or half of them in use) and given back to the flush otherwise;
// how many is learned (SpareCount: a RED page that had to wait for a chunk
// asks for one more).
Pipeline::Capturer::HeldChunk Pipeline::Capturer::HoldRoom(const Entry& e, ZeroCopyOrder& order,
                                                           std::vector<HeldChunk>* spares) {
  bool waited = false;  // for room, with no spare left
  for (HeldChunk h;;) {
    // Device blocks of earlier entries waiting to be drained need free host
    // chunks, and the flush may wait for them (DrainRoomAfterTaking): no
    // spares then.
    const bool drains = p_->device_mover_.DrainsPending();
    if (drains) FreeHeld(spares);
    const size_t chunks = p_->store_.chunk_count();
    const size_t keep = !drains && order.WantsSpares() ? p_->zero_copy_.spares().Keep(chunks) : 0;
    if (!spares->empty() && (order.RedWaiting() || spares->size() > keep)) {
      h = spares->back();
      spares->pop_back();
      return h;
    }
    if (DrainRoomAfterTaking(e)) {
      if (const std::optional<uint32_t> c =
              p_->TakeChunk(p_->store_.cache().chunk_bytes(), &h.touched)) {
        h.chunk = static_cast<int32_t>(*c);
        // Spares first (they went to the last RED pages): RED pages come one
        // after the other when the application writes from one thread.
        if (order.RedWaiting()) {
          if (waited && keep > 0)
            p_->zero_copy_.spares().Short(chunks);  // it waited for this chunk
          return h;
        }
        if (spares->size() >= keep) return h;
        spares->push_back(std::exchange(h, HeldChunk{}));
        continue;
      }
    }
    if (p_->store_.ReleaseOldestHold()) continue;
    // With a spare, look for RED pages every kRedPoll; without, wait for room.
    waited = waited || spares->empty();
    p_->WaitAsCaptureBlocked("blocked: cache full", false,
                             spares->empty() ? std::chrono::microseconds(0) : kRedPoll);
  }
}

}  // namespace cairn::core
