#include "engine/stages/flusher.hpp"

#include <utility>

#include "util/clock.hpp"
#include "util/crc32c.hpp"

namespace cairn::core {

namespace {

// Runs fn and adds its duration to *io_seconds.
template <typename Fn>
auto Timed(double* io_seconds, Fn&& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = fn();
  *io_seconds += SecondsSince(t0);
  return r;
}

}  // namespace

Flusher::Flusher(Mutex* mu, std::condition_variable_any* done, BlockStore* store,
                 MemoryMovers* movers, FlushTiers tiers, Owner* owner, Marks marks, bool verify)
    : mu_(mu),
      done_(done),
      store_(store),
      movers_(movers),
      tiers_(tiers),
      known_dirs_(tiers.known_dirs),
      owner_(owner),
      marks_(marks),
      verify_(verify),
      worker_(mu, done, this) {}

void Flusher::RunJob(EntryPtr& e) {
  mu_->AssertHeld();  // the Worker runs jobs with *mu held
  FlushEntry(e);
  owner_->Flushed(e);
}

void Flusher::AbortWriter(format::FileWriter& writer) {
  MutexUnlock unlocked(mu_);
  writer.Abort();
}

void Flusher::FailFlush(const EntryPtr& e, const Status& s, const char* what) {
  if (e->consumed()) {
    owner_->Skipped();
    return;
  }
  owner_->Fail(
      e, s.WithContext(std::string(what) + " of '" + e->name + "' " + std::to_string(e->number)));
}

Status Flusher::OpenWriter(const EntryPtr& e, std::unique_ptr<format::FileWriter>* writer,
                           double* io_seconds) {
  tiers::FileTier& tier = tiers_.For(e->kind);
  const std::string dir = tier.NameDir(e->name);
  const bool need_dir = !known_dirs_->contains(dir);
  Status s;
  {
    MutexUnlock unlocked(mu_);  // directory and file creation
    if (need_dir) s = tier.EnsureNameDir(e->name);
    if (s.ok()) {
      format::FileInfo info{
          .kind = e->kind,
          .name = e->name,
          .number = e->number,
          .created_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count()};
      auto w = Timed(io_seconds, [&] {
        return format::FileWriter::Create(tier.fs(), tier.EntryPath(e->name, e->kind, e->number),
                                          info, e->layout, tier.writer_options());
      });
      if (w.ok()) {
        *writer = std::move(w).value();
      } else {
        s = w.status();
      }
    }
  }
  if (s.ok() && need_dir) known_dirs_->insert(dir);
  return s;
}

std::optional<uint32_t> Flusher::WaitForReadyBlock(const Entry& e, uint32_t lowest) {
  const auto nblocks = static_cast<uint32_t>(e.blocks().size());
  std::optional<uint32_t> b;
  // failed(): the device mover could not drain a block of it (device_mover.cpp).
  worker_.cv().wait(*mu_, [&]() CAIRN_REQUIRES(*mu_) {
    if (e.consumed() || e.failed()) return true;
    for (uint32_t k = lowest; k < nblocks; ++k) {
      if (!Written(e, k) && e.blocks()[k].crc_ready) {
        b = k;
        return true;
      }
    }
    return false;
  });
  if (e.consumed()) return std::nullopt;
  if (b && e.blocks()[*b].chunk < 0) return std::nullopt;  // evicted: given up
  return b;
}

Status Flusher::WriteBlock(const EntryPtr& e, uint32_t b, format::FileWriter& writer,
                           double* io_seconds) {
  const BlockState& bs = e->blocks()[b];
  store_->Pin(*e);
  const uint8_t* data = store_->data(static_cast<uint32_t>(bs.chunk));
  const uint32_t crc = bs.crc;
  const uint32_t length = e->layout.blocks[b].length;
  Status s;
  {
    const MemoryMovers::Scope moving(movers_, MemoryMovers::Kind::kBackgroundIo);
    MutexUnlock unlocked(mu_);  // the block write (and its check)
    follower_.Follow(data);
    if (verify_ && crc32c::Value(data, length) != crc) {
      s = Status::Corrupt("block " + std::to_string(b) +
                          " changed in the host cache after its checksum was taken");
    } else {
      s = Timed(io_seconds, [&] { return writer.WriteBlock(b, data, crc); });
    }
  }
  if (s.ok()) {
    // Before the unpin: if a pop consumed the entry meanwhile, the last
    // unpin releases the chunks and must see this block as written (not
    // dirty).
    // Sets Written(*e, b).
    marks_.persistent ? store_->WrittenPersistently(*e, b) : store_->WrittenLocally(*e, b);
  }
  owner_->Unpin(e);
  return s;
}

// Blocks are written as their checksums become ready, lowest first, not
// strictly in order: in a checkpoint that mixes regions, host blocks are in
// the host cache at once while device blocks arrive later through the device
// mover, which may need the very chunks those host blocks hold. (Each block
// has a fixed place in the file, so the order is free.)
bool Flusher::WriteBlocks(const EntryPtr& e, format::FileWriter& writer, double* io_seconds) {
  const auto nblocks = static_cast<uint32_t>(e->blocks().size());
  uint32_t lowest_unwritten = 0;
  for (uint32_t left = nblocks; left > 0; --left) {
    const std::optional<uint32_t> b = WaitForReadyBlock(*e, lowest_unwritten);
    // Consumed before its flush ended (never written to disk), failed, or a
    // block evicted before this flusher wrote it (given up).
    if (!b) {
      const bool skipped = e->consumed();
      AbortWriter(writer);
      if (skipped) owner_->Skipped();
      return false;
    }
    if (Status s = WriteBlock(e, *b, writer, io_seconds); !s.ok()) {
      AbortWriter(writer);
      FailFlush(e, s, "flush");
      return false;
    }
    while (lowest_unwritten < nblocks && Written(*e, lowest_unwritten)) ++lowest_unwritten;
    done_->notify_all();
  }
  return true;
}

Status Flusher::Commit(format::FileWriter& writer, double* io_seconds) {
  MutexUnlock unlocked(mu_);  // temp + fsync + rename + dir fsync
  return Timed(io_seconds, [&] { return writer.Commit(); });
}

void Flusher::WritePlacement(const EntryPtr& e, const format::FileWriter& writer) {
  if (e->kind != format::EntryKind::kCheckpoint || !e->placement) return;
  format::Placement p = *e->placement;
  p.data_created_ns = writer.info().created_unix_ns;
  tiers::FileTier& tier = tiers_.For(e->kind);
  MutexUnlock unlocked(mu_);  // a small file: temp + rename
  (void)format::WritePlacement(tier.fs(), format::PlacementPath(tier.dir(), e->name, e->number), p);
}

void Flusher::FlushEntry(const EntryPtr& e) {
  const bool started = marks_.persistent ? e->persist().started : e->local().started;
  if (e->consumed() && !started) {
    owner_->Skipped();  // a history step popped before it was flushed
    return;
  }
  marks_.persistent ? store_->PersistStarted(*e) : store_->FlushStarted(*e);
  done_->notify_all();  // progress: e's flush started
  const auto flush_start = std::chrono::steady_clock::now();
  double io_seconds = 0;
  std::unique_ptr<format::FileWriter> writer;
  if (Status s = OpenWriter(e, &writer, &io_seconds); !s.ok()) return FailFlush(e, s, "flush");
  if (!WriteBlocks(e, *writer, &io_seconds)) return;
  if (e->consumed()) {
    AbortWriter(*writer);
    owner_->Skipped();
    return;
  }
  if (Status s = Commit(*writer, &io_seconds); !s.ok()) return FailFlush(e, s, "commit");
  WritePlacement(e, *writer);
  owner_->Committed(e, flush_start, io_seconds);
}

}  // namespace cairn::core
