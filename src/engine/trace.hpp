// Timeline tracing: a Chrome / Perfetto trace-event file (JSON) of what the
// application and the pipeline did: application blocking spans, captures,
// flushes, persistent copies, prefetches, evictions and cache occupancy, with
// bytes as arguments. Enabled by trace.path / CAIRN_TRACE; open the file in
// ui.perfetto.dev or chrome://tracing.
//
// Events are kept in memory (bounded: past max_events they are counted as
// dropped, never grown without limit) and written once, by Write(), when the
// client closes. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "cairn/status.hpp"
#include "os/fs/fs.hpp"
#include "util/mutex.hpp"

namespace cairn::core {

class Tracer {
 public:
  using Clock = std::chrono::steady_clock;

  // An empty path disables tracing: every call is then a cheap no-op. The
  // file is written through `fs` (not owned).
  Tracer(std::string path, os::FileSystem* fs, size_t max_events = size_t{1} << 20);

  bool enabled() const { return !path_.empty(); }

  // Names the calling thread's track ("app", "flusher", ...).
  void NameThread(const std::string& name);
  // A complete span [start, end) on the calling thread's track. `name` and
  // `category` must be string literals (they are stored as pointers).
  void Span(const char* name, const char* category, Clock::time_point start, Clock::time_point end,
            uint64_t bytes, const std::string& entry = {}, int64_t number = -1);
  // A point event (eviction, failure).
  void Instant(const char* name, const char* category, uint64_t bytes, const std::string& entry = {});
  // A counter track value (cache occupancy).
  void Counter(const char* name, uint64_t used_bytes, uint64_t dirty_bytes);

  // Writes the file (temp + rename). Idempotent: later calls do nothing.
  Status Write();

  uint64_t dropped() const;

 private:
  struct Event {
    char phase;  // 'X' span, 'i' instant, 'C' counter, 'M' metadata
    const char* name;
    const char* category;
    int tid;
    double ts_us;
    double dur_us;
    uint64_t a;  // bytes, or used bytes for counters
    uint64_t b;  // dirty bytes for counters
    int64_t number;
    std::string entry;  // entry name, or the thread name for 'M'
  };
  bool Admit() CAIRN_REQUIRES(mu_);
  int Tid();
  double Micros(Clock::time_point t) const;

  const std::string path_;
  os::FileSystem* const fs_;
  const size_t max_events_;
  const Clock::time_point origin_ = Clock::now();
  mutable Mutex mu_;
  std::vector<Event> events_ CAIRN_GUARDED_BY(mu_);
  uint64_t dropped_ CAIRN_GUARDED_BY(mu_) = 0;
  bool written_ CAIRN_GUARDED_BY(mu_) = false;
};

}  // namespace cairn::core
