// The flush stage: the flusher writes entries in FIFO order to the local tier
// as their blocks' checksums become ready (checksummer.hpp), and commits them.
#include <chrono>

#include "core/pipeline.hpp"
#include "format/file_writer.hpp"
#include "util/clock.hpp"

namespace cairn::core {

// Flushes the oldest entry (the flusher's queue is in capture order).
void Pipeline::FlushNext(const EntryPtr& e) {
  FlushEntry(e);
  if (e->kind == format::EntryKind::kHistoryStep && !config_.history_persistent &&
      !catalog_.HasHistory(e->name)) {
    // Its history was closed while this step was in flight: the directory
    // removal skipped then can happen now.
    const std::string name = e->name;
    EnqueueMover([this, name] { RemoveNameDirIfUnused(name); });
  }
  prefetcher_.Wake();
}

void Pipeline::AbortWriter(format::FileWriter& writer) {
  MutexUnlock unlocked(&mu_);
  writer.Abort();
}

void Pipeline::FailFlush(const EntryPtr& e, const Status& s, const char* what) {
  if (e->consumed) {
    ++stats_.flushes_skipped;
    return;
  }
  FailEntry(e, s.WithContext(std::string(what) + " of '" + e->name + "' " + std::to_string(e->number)));
}

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

Status Pipeline::OpenWriter(const EntryPtr& e, std::unique_ptr<format::FileWriter>* writer,
                            double* io_seconds) {
  tiers::FileTier& tier = tier_for(e->kind);
  const std::string dir = tier.NameDir(e->name);
  const bool need_dir = !known_dirs_.contains(dir);
  Status s;
  {
    MutexUnlock unlocked(&mu_);  // directory and file creation
    if (need_dir) s = tier.EnsureNameDir(e->name);
    if (s.ok()) {
      format::FileInfo info{.kind = e->kind, .name = e->name, .number = e->number,
                            .created_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                   std::chrono::system_clock::now().time_since_epoch())
                                                   .count()};
      auto w = Timed(io_seconds, [&] {
        return format::FileWriter::Create(fs_, tier.EntryPath(e->name, e->kind, e->number), info,
                                          e->layout, tier.writer_options());
      });
      if (w.ok()) {
        *writer = std::move(w).value();
      } else {
        s = w.status();
      }
    }
  }
  if (s.ok() && need_dir) known_dirs_.insert(dir);
  return s;
}

// Blocks are written as their checksums become ready, lowest first, not
// strictly in order: in a checkpoint that mixes regions, host blocks are in
// the host cache at once while device blocks arrive later through the device
// mover, which may need the very chunks those host blocks hold. (Each block
// has a fixed place in the file, so the order is free.)
bool Pipeline::WriteBlocks(const EntryPtr& e, format::FileWriter& writer, double* io_seconds) {
  const auto nblocks = static_cast<uint32_t>(e->blocks.size());
  uint32_t lowest_unwritten = 0;
  for (uint32_t left = nblocks; left > 0; --left) {
    uint32_t b = nblocks;  // the block to write next, once one is ready
    // failed(): the device mover could not drain a block of it (gpu_tier.cpp).
    flusher_.cv().wait(mu_, [&]() CAIRN_REQUIRES(mu_) {
      if (e->consumed || e->failed()) return true;
      for (uint32_t k = lowest_unwritten; k < nblocks; ++k) {
        if (!e->blocks[k].written && e->blocks[k].crc_ready) {
          b = k;
          return true;
        }
      }
      return false;
    });
    // Consumed before its flush ended (never written to disk), or failed.
    if (const bool skipped = e->consumed; skipped || b == nblocks) {
      AbortWriter(writer);
      if (skipped) ++stats_.flushes_skipped;
      return false;
    }
    BlockState& bs = e->blocks[b];
    ++e->pins;
    const uint8_t* data = cache_->data(static_cast<uint32_t>(bs.chunk));
    UseBandwidth(+1, /*capture=*/false);
    Status s;
    {
      MutexUnlock unlocked(&mu_);  // the block write
      s = Timed(io_seconds, [&] { return writer.WriteBlock(b, data, bs.crc); });
    }
    UseBandwidth(-1, /*capture=*/false);
    if (s.ok()) {
      // Before Unpin: if a pop consumed the entry meanwhile, the last Unpin
      // releases the chunks and must see this block as written (not dirty).
      bs.written = true;
      dirty_bytes_ -= e->layout.blocks[b].length;
      if (!e->consumed) host_tier_.MarkClean(*e, b);
      while (lowest_unwritten < nblocks && e->blocks[lowest_unwritten].written) ++lowest_unwritten;
    }
    Unpin(e);
    if (!s.ok()) {
      AbortWriter(writer);
      FailFlush(e, s, "flush");
      return false;
    }
    cv_app_.notify_all();
  }
  return true;
}

// Writes one entry; drops mu_ for I/O.
void Pipeline::FlushEntry(const EntryPtr& e) {
  if (e->consumed && !e->flush_started) {
    ++stats_.flushes_skipped;  // a history step popped before it was flushed
    return;
  }
  e->flush_started = true;
  const auto flush_start = std::chrono::steady_clock::now();
  double io_seconds = 0;
  std::unique_ptr<format::FileWriter> writer;
  if (Status s = OpenWriter(e, &writer, &io_seconds); !s.ok()) return FailFlush(e, s, "flush");
  if (!WriteBlocks(e, *writer, &io_seconds)) return;
  if (e->consumed) {
    AbortWriter(*writer);
    ++stats_.flushes_skipped;
    return;
  }
  Status s;
  {
    MutexUnlock unlocked(&mu_);  // temp + fsync + rename + dir fsync
    s = Timed(&io_seconds, [&] { return writer->Commit(); });
  }
  if (!s.ok()) return FailFlush(e, s, "commit");
  CommitFlushed(e, flush_start, io_seconds);
}

// The entry's file is committed: stats, and what the mover does next.
void Pipeline::CommitFlushed(const EntryPtr& e, std::chrono::steady_clock::time_point flush_start,
                             double io_seconds) {
  e->local_committed = true;
  tracer_.Span("flush", "local", flush_start, std::chrono::steady_clock::now(), e->layout.payload_bytes,
               e->name, e->number);
  TraceCache();
  stats_.flush_local.bytes += e->layout.payload_bytes;
  stats_.flush_local.ops += 1;
  stats_.flush_local.seconds += io_seconds;
  if (e->consumed) {
    // Popped while its commit was running: the file must go.
    tiers::FileTier* t = &tier_for(e->kind);
    std::string name = e->name;
    auto kind = e->kind;
    auto number = e->number;
    EnqueueMover([t, name, kind, number] { (void)t->RemoveEntry(name, kind, number); });
  } else if (e->kind == format::EntryKind::kCheckpoint) {
    if (persistent_) {
      e->persist_pending = true;
      EnqueueMover([this, e] { PersistEntry(e); });
    } else {
      std::string name = e->name;
      EnqueueMover([this, name] { ApplyRetention(name); });
    }
  }
  cv_app_.notify_all();
}

}  // namespace cairn::core
