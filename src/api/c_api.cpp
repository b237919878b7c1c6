// The C API: opaque handles over the C++ API. Nothing may escape as an
// exception: every entry point catches everything (std::bad_alloc included)
// and turns it into a negative error code plus a thread-local message.
#include "cairn/cairn.h"

#include <new>
#include <string>

#include "cairn/cairn.hpp"

struct cairn_client {
  std::unique_ptr<cairn::Client> client;
};

struct cairn_history {
  std::unique_ptr<cairn::History> history;
};

namespace {

thread_local std::string g_last_error;

int Report(const cairn::Status& s) {
  if (s.ok()) return CAIRN_OK;
  g_last_error = s.ToString();
  return static_cast<int>(s.code());
}

int InvalidHandle(const char* what) {
  return Report(cairn::Status::InvalidArgument(std::string(what) + " is NULL"));
}

// Runs fn() and converts exceptions (which Cairn itself does not throw, but
// the standard library may: bad_alloc) into error codes.
template <typename Fn>
int Guard(Fn&& fn) noexcept {
  try {
    g_last_error.clear();
    return fn();
  } catch (const std::bad_alloc&) {
    return Report(cairn::Status::NoMemory("out of memory"));
  } catch (const std::exception& e) {
    return Report(cairn::Status::Internal(e.what()));
  } catch (...) {
    return Report(cairn::Status::Internal("unknown exception"));
  }
}

}  // namespace

extern "C" {

int cairn_open(const char* config_path, cairn_client_t** out) {
  return Guard([&]() -> int {
    if (out == nullptr) return InvalidHandle("out");
    *out = nullptr;
    auto client = cairn::Client::Open(config_path);
    if (!client.ok()) return Report(client.status());
    *out = new cairn_client{std::move(client).value()};
    return CAIRN_OK;
  });
}

int cairn_close(cairn_client_t* c) {
  return Guard([&]() -> int {
    if (c == nullptr) return CAIRN_OK;
    cairn::Status s = c->client->Close();
    delete c;
    return Report(s);
  });
}

int cairn_protect(cairn_client_t* c, int id, void* ptr, size_t bytes) {
  return Guard([&]() -> int { return c ? Report(c->client->Protect(id, ptr, bytes)) : InvalidHandle("client"); });
}

int cairn_unprotect(cairn_client_t* c, int id) {
  return Guard([&]() -> int { return c ? Report(c->client->Unprotect(id)) : InvalidHandle("client"); });
}

int cairn_checkpoint(cairn_client_t* c, const char* name, int64_t version) {
  return Guard([&]() -> int {
    if (c == nullptr) return InvalidHandle("client");
    if (name == nullptr) return InvalidHandle("name");
    return Report(c->client->Checkpoint(name, version));
  });
}

int cairn_wait(cairn_client_t* c, const char* name, int64_t version, cairn_level_t level) {
  return Guard([&]() -> int {
    if (c == nullptr) return InvalidHandle("client");
    if (name == nullptr) return InvalidHandle("name");
    return Report(c->client->Wait(name, version, static_cast<cairn::Level>(level)));
  });
}

int cairn_latest(cairn_client_t* c, const char* name, int64_t* version_out) {
  return Guard([&]() -> int {
    if (c == nullptr) return InvalidHandle("client");
    if (name == nullptr) return InvalidHandle("name");
    if (version_out == nullptr) return InvalidHandle("version_out");
    auto v = c->client->Latest(name);
    if (!v.ok()) return Report(v.status());
    *version_out = *v;
    return CAIRN_OK;
  });
}

int cairn_restore(cairn_client_t* c, const char* name, int64_t version) {
  return Guard([&]() -> int {
    if (c == nullptr) return InvalidHandle("client");
    if (name == nullptr) return InvalidHandle("name");
    return Report(c->client->Restore(name, version));
  });
}

int cairn_history_open(cairn_client_t* c, const char* name, cairn_history_t** out) {
  return Guard([&]() -> int {
    if (c == nullptr) return InvalidHandle("client");
    if (name == nullptr) return InvalidHandle("name");
    if (out == nullptr) return InvalidHandle("out");
    *out = nullptr;
    auto h = c->client->OpenHistory(name);
    if (!h.ok()) return Report(h.status());
    *out = new cairn_history{std::move(h).value()};
    return CAIRN_OK;
  });
}

int cairn_history_push(cairn_history_t* h, int64_t step, const void* data, size_t bytes) {
  return Guard([&]() -> int { return h ? Report(h->history->Push(step, data, bytes)) : InvalidHandle("history"); });
}

int cairn_history_pop(cairn_history_t* h, int64_t step, void* dst, size_t capacity,
                      size_t* bytes_out) {
  return Guard([&]() -> int {
    if (h == nullptr) return InvalidHandle("history");
    auto n = h->history->Pop(step, dst, capacity);
    if (!n.ok()) return Report(n.status());
    if (bytes_out) *bytes_out = *n;
    return CAIRN_OK;
  });
}

int cairn_history_close(cairn_history_t* h) {
  return Guard([&]() -> int {
    if (h == nullptr) return CAIRN_OK;
    cairn::Status s = h->history->Close();
    delete h;
    return Report(s);
  });
}

const char* cairn_strerror(int err) {
  switch (err) {
    case CAIRN_OK: return "success";
    case CAIRN_ERR_INVALID_ARGUMENT: return "invalid argument";
    case CAIRN_ERR_CONFIG: return "bad configuration";
    case CAIRN_ERR_NOT_FOUND: return "not found";
    case CAIRN_ERR_CORRUPT: return "checkpoint data is corrupt (checksum or structure mismatch)";
    case CAIRN_ERR_IO: return "I/O error";
    case CAIRN_ERR_NO_SPACE: return "no space left on the storage device";
    case CAIRN_ERR_SIZE_MISMATCH: return "region or buffer size mismatch";
    case CAIRN_ERR_NO_MEMORY: return "out of memory";
    case CAIRN_ERR_STATE: return "operation not valid in the current state";
    case CAIRN_ERR_UNSUPPORTED: return "operation not supported";
    case CAIRN_ERR_EXISTS: return "version or step already exists";
    case CAIRN_ERR_INTERNAL: return "internal error (a bug in Cairn)";
    default: return "unknown error code";
  }
}

const char* cairn_last_error(void) { return g_last_error.c_str(); }

int cairn_stats(cairn_client_t* c, cairn_stats_t* out) {
  return Guard([&]() -> int {
    if (c == nullptr) return InvalidHandle("client");
    if (out == nullptr) return InvalidHandle("out");
    cairn::Stats s = c->client->GetStats();
    *out = cairn_stats_t{
        .capture_bytes = s.capture.bytes,
        .flush_local_bytes = s.flush_local.bytes,
        .flush_persistent_bytes = s.flush_persistent.bytes,
        .prefetch_bytes = s.prefetch.bytes,
        .restore_bytes = s.restore.bytes,
        .capture_seconds = s.capture.seconds,
        .flush_local_seconds = s.flush_local.seconds,
        .flush_persistent_seconds = s.flush_persistent.seconds,
        .prefetch_seconds = s.prefetch.seconds,
        .restore_seconds = s.restore.seconds,
        .cache_hits = s.cache_hits,
        .cache_misses = s.cache_misses,
        .prefetch_waits = s.prefetch_waits,
        .evictions = s.evictions,
        .flushes_skipped = s.flushes_skipped,
        .failed_flushes = s.failed_flushes,
        .capture_blocked_seconds = s.capture_blocked_s,
        .cache_capacity_bytes = s.cache_capacity_bytes,
        .cache_used_bytes = s.cache_used_bytes,
        .cache_dirty_bytes = s.cache_dirty_bytes,
        .init_fully_touched_seconds = s.init.fully_touched_s,
        .init_pinned_seconds = s.init.pinned_s,
        .init_touched_bytes = s.init.touched_bytes,
        .capture_untouched_bytes = s.init.capture_untouched_bytes,
        .capture_touched_bytes = s.init.capture_touched_bytes,
        .capture_pinned_bytes = s.init.capture_pinned_bytes,
        .init_mode_switches = s.init.mode_switches,
        .init_strategy = static_cast<int32_t>(s.init.strategy),
        .init_pin_failed = s.init.pin_error.empty() ? 0 : 1,
        .device_gpu = s.device.gpu ? 1 : 0,
        .device_init = static_cast<int32_t>(s.device.init),
        .device_capacity_bytes = s.device.capacity_bytes,
        .device_mapped_bytes = s.device.mapped_bytes,
        .device_used_bytes = s.device.used_bytes,
        .device_fully_mapped_seconds = s.device.fully_mapped_s,
        .device_capture_bytes = s.device.capture.bytes,
        .device_drain_bytes = s.device.drain.bytes,
        .device_prefetch_bytes = s.device.prefetch.bytes,
        .device_capture_seconds = s.device.capture.seconds,
        .device_drain_seconds = s.device.drain.seconds,
        .device_prefetch_seconds = s.device.prefetch.seconds,
        .device_hits = s.device.hits,
        .device_evictions = s.device.evictions,
        .device_bounce_bytes = s.device.bounce_bytes,
        .device_capture_blocked_seconds = s.device.capture_blocked_s,
        .device_map_failed = s.device.map_error.empty() ? 0 : 1,
        .device_reserved = 0,
    };
    return CAIRN_OK;
  });
}

}  // extern "C"
