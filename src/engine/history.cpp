// Histories: open, pop (from the cache or the step's file), step sizes, close,
// the mover's removal of a closed history's directory, and the prefetcher's
// view of the pipeline (prefetcher.hpp).
#include <chrono>
#include <cstring>

#include "engine/reader.hpp"
#include "format/file_reader.hpp"
#include "format/naming.hpp"

namespace cairn::core {

Status Pipeline::OpenHistory(const std::string& name) {
  CAIRN_RETURN_IF_ERROR(format::ValidateName(name));
  {
    MutexLock lock(&mu_);
    if (closing_) return Status::State("client is closing");
    if (catalog_.HasHistory(name)) return Status::State("history '" + name + "' is already open");
  }
  const auto kind = format::EntryKind::kHistoryStep;
  CAIRN_ASSIGN_OR_RETURN(auto existing, history_.ListCommitted(name, kind));
  std::vector<std::pair<EntryPtr, std::vector<uint32_t>>> adopted;  // entries, block CRCs
  for (int64_t step : existing) {
    if (!config_.history_persistent) {
      // Left behind by a run that crashed: scratch data, not a restart point.
      (void)history_.RemoveEntry(name, kind, step);
      continue;
    }
    auto reader = format::FileReader::Open(fs_, history_.EntryPath(name, kind, step));
    if (!reader.ok()) continue;  // damaged: a pop of it reports kNotFound
    auto e = std::make_shared<Entry>();
    e->kind = kind;
    e->name = name;
    e->number = step;
    e->layout = (*reader)->layout();
    std::vector<uint32_t> crcs(e->layout.blocks.size());
    for (uint32_t b = 0; b < crcs.size(); ++b) crcs[b] = (*reader)->block_crc(b);
    adopted.emplace_back(std::move(e), std::move(crcs));
  }
  MutexLock lock(&mu_);
  if (catalog_.HasHistory(name)) return Status::State("history '" + name + "' is already open");
  catalog_.OpenHistory(name);
  for (auto& [e, crcs] : adopted) {
    store_.FromCommittedFile(*e, crcs);
    catalog_.Add(e);
  }
  return Status::Ok();
}

Result<size_t> Pipeline::StepSize(const std::string& name, int64_t step) {
  MutexLock lock(&mu_);
  EntryPtr e = catalog_.Find(format::EntryKind::kHistoryStep, name, step);
  if (!e)
    return Status::NotFound(format::EntryLabel(format::EntryKind::kHistoryStep, name, step) +
                            " is not there");
  return static_cast<size_t>(e->layout.payload_bytes);
}

Result<size_t> Pipeline::Pop(const std::string& name, int64_t step, void* dst, size_t capacity,
                             MemoryKind dst_kind) {
  return Reader(this).Pop(name, step, dst, capacity, dst_kind);
}

Result<size_t> Pipeline::Reader::Pop(const std::string& name, int64_t step, void* dst,
                                     size_t capacity, MemoryKind dst_kind) {
  const auto kind = format::EntryKind::kHistoryStep;
  const std::string label = format::EntryLabel(kind, name, step);
  auto t0 = std::chrono::steady_clock::now();
  p_->zero_copy_.WaitIdle();  // dst may be protected by a zero-copy epoch being read
  if (dst_kind == MemoryKind::kHost)
    p_->layering_->BeforeRestore(dst, capacity);  // a write into tracked memory
  MutexLock lock(&p_->mu_);
  Catalog::History* hist = p_->catalog_.FindHistory(name);
  if (!hist) return Status::State("history '" + name + "' is not open");
  EntryPtr e = p_->catalog_.Find(kind, name, step);
  if (!e) return Status::NotFound(label + " is not there (never pushed, or already popped)");
  const size_t bytes = static_cast<size_t>(e->layout.payload_bytes);
  if (capacity < bytes) {
    return Status::SizeMismatch(label + " has " + std::to_string(bytes) +
                                " bytes; the buffer holds only " + std::to_string(capacity));
  }
  if (!hist->popping) {
    // The first pop: prefetching starts now, alongside this pop's read.
    hist->popping = true;
    p_->prefetcher_.Wake();
    p_->device_mover_.Wake();
  }
  if (e->reads().prefetching) ++p_->stats_.prefetch_waits;
  p_->cv_app_.wait(lock, [&] {
    return e->consumed() || (e->capture().done && !e->reads().prefetching &&
                             (e->fully_cached() || e->local().committed || e->failed()));
  });
  if (e->consumed()) return Status::NotFound(label + " was popped concurrently");
  const std::vector<RestoreTarget> target{
      {.id = e->layout.regions.empty() ? 0 : e->layout.regions[0].spec.id,
       .memory = dst_kind,
       .data = dst,
       .bytes = bytes}};
  Status s;
  bool hit = false;
  bool device_hit = false;
  p_->store_.Pin(*e);  // keeps the entry from being popped twice or evicted meanwhile
  if (e->fully_cached()) {
    hit = true;
    if (bytes > 0) s = CopyFromCache(e, target, &device_hit);
  } else if (e->failed()) {
    s = e->local().error.WithContext(label + " was lost");
  } else {
    p_->store_.PopReading(*e, true);  // the prefetcher leaves it to us
    lock.Unlock();
    s = ReadFromFiles(kind, name, step, bytes == 0 ? std::vector<RestoreTarget>{} : target);
    lock.Lock();
    p_->store_.PopReading(*e, false);
  }
  if (!s.ok()) {
    p_->Unpin(e);
    return s;
  }
  if (device_hit) ++p_->stats_.device.hits;
  NoteRead(hit, bytes, t0, hit ? "pop (cache hit)" : "pop (from file)", name, step);
  p_->catalog_.DropStep(name, step);
  const bool delete_file = e->local().committed;
  p_->Consume(e);
  p_->Unpin(e);
  if (delete_file) {
    tiers::FileTier* t = &p_->history_;
    p_->mover_.Remove(t, name, format::EntryKind::kHistoryStep, step);
  }
  p_->TraceCache();
  p_->prefetcher_.Wake();
  p_->device_mover_.Wake();
  return bytes;
}

Status Pipeline::CloseHistory(const std::string& name) {
  const auto kind = format::EntryKind::kHistoryStep;
  MutexLock lock(&mu_);
  Catalog::History* hist = catalog_.FindHistory(name);
  if (!hist) return Status::Ok();
  std::vector<EntryPtr> entries;
  for (int64_t step : hist->steps) {
    if (EntryPtr e = catalog_.Find(kind, name, step)) entries.push_back(e);
  }
  if (config_.history_persistent) {
    // Steps stay on disk for a later run: let their flushes finish.
    cv_app_.wait(lock, [&] {
      for (const auto& e : entries) {
        if (!e->local().committed && !e->failed()) return false;
      }
      return true;
    });
  }
  // Not popping any more: let in-flight prefetches end before releasing.
  cv_app_.wait(lock, [&] {
    for (const auto& e : entries) {
      if (e->reads().prefetching) return false;
    }
    return true;
  });
  catalog_.CloseHistory(name);
  for (const auto& e : entries) {
    const bool delete_file = e->local().committed && !config_.history_persistent;
    Consume(e);
    if (delete_file) {
      tiers::FileTier* t = &history_;
      int64_t step = e->number;
      mover_.Remove(t, name, format::EntryKind::kHistoryStep, step);
    }
  }
  if (!config_.history_persistent) {
    mover_.HistoryClosed(name);
  }
  return Status::Ok();
}

// Runs on the mover (Mover::HistoryClosed), after the history's file
// deletions queued before it. Best effort: rmdir fails harmlessly when
// checkpoint versions live there too. THE EXCEPTION to "no file I/O under
// mu_" (pipeline.hpp): holding mu_ across the rmdir keeps the flusher from
// creating a file in the directory meanwhile (an entry queued or being
// flushed is the flusher's). One rmdir of an empty directory, on the mover
// thread, after a history is closed.
void Pipeline::RemoveNameDirIfUnused(const std::string& name) {
  if (catalog_.HasHistory(name)) return;  // reopened
  // Queued for the flusher, or being flushed.
  for (const auto& e : flusher_.queue()) {
    if (e->name == name) return;
  }
  if (const auto& e = flusher_.in_hand(); e && (*e)->name == name) return;
  const std::string dir = history_.NameDir(name);
  if (fs_->RemoveDir(dir).ok()) known_dirs_.erase(dir);
}

}  // namespace cairn::core
