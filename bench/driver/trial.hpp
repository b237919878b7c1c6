// Helpers shared by the trials (workloads.cpp, restart.cpp).
//
// Timing contract: blocking time is only the time the application thread
// spends inside a checkpoint/restore call (Push, Pop, Checkpoint, Wait,
// Latest, Restore or the baseline's equivalents). Everything else the
// application does (stamping its buffer, verifying restored data) happens
// inside the compute interval that precedes the next call: the interval is a
// deadline, so that both modes give the background work the same T ms per
// step. Steps whose stamping/verification alone exceeded T are counted as
// overruns (PhaseResult::compute_overruns).
#pragma once

#include <cstdlib>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "driver/bench.hpp"
#include "cairn/cairn.hpp"
#include "common/files.hpp"
#include "driver/sync_baseline.hpp"

namespace cairn::bench {

// A number distinct for every trial of the process (see MakeTag).
inline uint64_t NextTrialSalt() {
  static std::atomic<uint64_t> salt{1};
  return salt++;
}

inline Clock::time_point DeadlineAfter(double ms) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double, std::milli>(ms));
}

// Emulates the application's compute until `deadline`: sleeping (like the
// paper's benchmark) or reading the application buffer in a loop. Returns true
// when the deadline had already passed (an overrun).
inline bool ComputeUntil(Clock::time_point deadline, ComputeKind kind, const uint8_t* app,
                         size_t n) {
  if (Clock::now() >= deadline) return true;
  if (kind == ComputeKind::kSleep || n < 8) {
    std::this_thread::sleep_until(deadline);
    return false;
  }
  static size_t pos = 0;  // the sweep carries over, so the whole buffer gets touched
  uint64_t sum = 0;
  constexpr size_t kSlice = 64u << 10;
  while (Clock::now() < deadline) {
    if (pos + 8 > n) pos = 0;
    const size_t end = pos + kSlice < n ? pos + kSlice : n;
    for (; pos + 8 <= end; pos += 64) {  // one word per cache line
      uint64_t w;
      std::memcpy(&w, app + pos, 8);
      sum += w;
    }
  }
  asm volatile("" : : "r"(sum));
  return false;
}

inline void Account(PhaseResult& ph, double dt, uint64_t bytes) {
  ph.blocking_s += dt;
  ph.max_op_s = dt > ph.max_op_s ? dt : ph.max_op_s;
  ph.bytes += bytes;
  ++ph.ops;
}

// The Cairn configuration of a trial: defaults (no environment, no file, so
// runs are reproducible) with the bench's directory and cache options, and no
// persistent tier (the paper's evaluation stops at the node-local tiers)
// unless restart --persistent DIR gives one (DIR/cairn).
// The one variable honoured is CAIRN_TRACE: each trial writes its timeline
// there at close, so the file holds the last async trial's.
inline Config MakeConfig(const Options& o, const std::string& scratch_dir) {
  // --set keys first (checked by ParseOptions), then the bench's own options.
  Result<Config> set = LoadConfigFromString(o.config_toml, "--set", /*apply_environment=*/false);
  Config c = set.ok() ? std::move(set).value() : DefaultConfig();
  if (const char* trace = std::getenv("CAIRN_TRACE")) c.trace_path = trace;
  c.scratch_dir = scratch_dir;
  c.persistent_dir = o.persistent_dir.empty() ? std::string() : o.persistent_dir + "/cairn";
  c.host_cache_bytes = o.host_cache;
  c.init = o.init;
  c.pin = o.pin;
  c.huge_pages = o.huge_pages;
  if (o.block_size) c.block_bytes = *o.block_size;
  c.device_cache_bytes = o.device_cache;
  c.device_cache_init = o.device_cache_init;
  if (o.device_map_chunk) c.device_map_chunk_bytes = *o.device_map_chunk;
  c.changes = o.changes;
  if (o.max_layers) c.max_layers = *o.max_layers;
  return c;
}

// The baseline's store in `dir`, removed first; the open is timed into
// r.open_s. With device/managed memory it gets a host staging buffer of
// `staging_bytes` (allocated and touched inside the open). On failure the
// error is in r.status too.
inline Result<SyncStore> OpenTrialStore(const Options& o, const std::string& dir,
                                        size_t staging_bytes, TrialResult& r) {
  if (r.status = RemoveTree(dir); !r.status.ok()) return r.status;
  const Clock::time_point t0 = Clock::now();
  Result<SyncStore> store =
      SyncStore::Open(dir, o.sync_fsync, o.memory == MemoryKind::kHost ? 0 : staging_bytes);
  r.open_s = Seconds(t0, Clock::now());
  if (!store.ok()) r.status = store.status().WithContext("sync open");
  return store;
}

// A client on `dir` (MakeConfig), emptied first; Client::Open is timed into
// r.open_s. On failure nullptr, with the error in r.status.
inline std::unique_ptr<Client> OpenTrialClient(const Options& o, const std::string& dir,
                                               TrialResult& r) {
  if (r.status = EmptyDir(dir); !r.status.ok()) return nullptr;
  const Clock::time_point t0 = Clock::now();
  Result<std::unique_ptr<Client>> client = Client::Open(MakeConfig(o, dir));
  r.open_s = Seconds(t0, Clock::now());
  if (!client.ok()) {
    r.status = client.status().WithContext("Client::Open");
    return nullptr;
  }
  return std::move(client).value();
}

}  // namespace cairn::bench
