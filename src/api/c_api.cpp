// The C API: opaque handles over the C++ API. Nothing may escape as an
// exception: every entry point catches everything (std::bad_alloc included)
// and turns it into a negative error code plus a thread-local message.
#include "cairn/cairn.h"

#include <cstddef>
#include <cstring>
#include <new>
#include <string>
#include <string_view>

#include "cairn/cairn.hpp"
#include "cairn/group.hpp"

// cairn_stats_t is the size header then the rows of cairn_stats.def, with no
// padding: a new row that would need some must be paired (see the .def).
namespace {
constexpr size_t StatsRowBytes() {
  size_t n = sizeof(uint64_t);
#define CAIRN_STAT(kind, name, expr, doc) n += sizeof(cairn_stats_t::name);
#include "cairn/cairn_stats.def"
#undef CAIRN_STAT
  return n;
}
}  // namespace
static_assert(sizeof(cairn_stats_t) == StatsRowBytes(), "cairn_stats_t has padding: pair FLAG/ENUM rows");

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

namespace cairn {

cairn_client_t* ToCHandle(std::unique_ptr<Client> client) { return new cairn_client{std::move(client)}; }
Client* FromCHandle(cairn_client_t* c) { return c != nullptr ? c->client.get() : nullptr; }

int ReportToC(const Status& status) {
  if (status.ok()) g_last_error.clear();
  return Report(status);
}

}  // namespace cairn

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

int cairn_protect_ex(cairn_client_t* c, int id, void* ptr, size_t bytes, const cairn_protect_options_t* opts) {
  return Guard([&]() -> int {
    if (c == nullptr) return InvalidHandle("client");
    cairn::ProtectOptions o;
    if (opts != nullptr) {
      if (opts->size < sizeof opts->size) {
        return Report(cairn::Status::InvalidArgument(
            "cairn_protect_ex: opts->size is " + std::to_string(opts->size) +
            ": set it to sizeof(cairn_protect_options_t) (CAIRN_PROTECT_OPTIONS_INIT)"));
      }
      // A member exists in the caller's struct when it ends within size.
      const bool has_changes = opts->size >= offsetof(cairn_protect_options_t, changes) + sizeof opts->changes;
      if (has_changes && opts->changes != CAIRN_CHANGES_DEFAULT) {
        o.changes = static_cast<cairn::ChangeDetection>(opts->changes);
      }
    }
    return Report(c->client->Protect(id, ptr, bytes, o));
  });
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

int cairn_checkpoint_due(cairn_client_t* c, const char* name, int* due) {
  return Guard([&]() -> int {
    if (due != nullptr) *due = 0;
    if (c == nullptr) return InvalidHandle("client");
    if (name == nullptr) return InvalidHandle("name");
    if (due == nullptr) return InvalidHandle("due");
    auto d = c->client->CheckpointDue(name);
    if (!d.ok()) return Report(d.status());
    *due = *d ? 1 : 0;
    return CAIRN_OK;
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

int cairn_restore_begin(cairn_client_t* c) {
  return Guard([&]() -> int {
    if (c == nullptr) return InvalidHandle("client");
    return Report(c->client->BeginRestore());
  });
}

int cairn_restore_end(cairn_client_t* c) {
  return Guard([&]() -> int {
    if (c == nullptr) return InvalidHandle("client");
    return Report(c->client->EndRestore());
  });
}

int cairn_restore_latest(cairn_client_t* c, const char* name, int64_t* version_out) {
  return Guard([&]() -> int {
    if (version_out != nullptr) *version_out = -1;
    if (c == nullptr) return InvalidHandle("client");
    if (name == nullptr) return InvalidHandle("name");
    if (version_out == nullptr) return InvalidHandle("version_out");
    auto v = c->client->RestoreLatest(name);
    if (!v.ok()) return Report(v.status());
    *version_out = *v;
    return CAIRN_OK;
  });
}

int cairn_register_thread(cairn_client_t* c, int index) {
  return Guard([&]() -> int {
    if (c == nullptr) return InvalidHandle("client");
    return Report(c->client->RegisterThread(index));
  });
}

int cairn_restore_affinity(cairn_client_t* c, int index) {
  return Guard([&]() -> int {
    if (c == nullptr) return InvalidHandle("client");
    return Report(c->client->RestoreAffinity(index));
  });
}

void cairn_set_log_fn(cairn_log_fn fn, void* user) {
  if (fn == nullptr) {
    cairn::SetLogFunction(nullptr);
    return;
  }
  // The message is cut to a NUL-terminated string for C (util::Log formats
  // into a terminated buffer, but std::string_view promises no terminator).
  try {
    cairn::SetLogFunction([fn, user](cairn::LogLevel level, std::string_view message) {
      std::string text(message);
      fn(user, static_cast<cairn_log_level_t>(level), text.c_str());
    });
  } catch (const std::bad_alloc&) {  // the previous function stays
  }
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

int cairn_alloc(size_t bytes, void** out) {
  return Guard([&]() -> int {
    if (out == nullptr) return InvalidHandle("out");
    *out = nullptr;
    auto p = cairn::Alloc(bytes);
    if (!p.ok()) return Report(p.status());
    *out = *p;
    return CAIRN_OK;
  });
}

int cairn_free(void* ptr) {
  return Guard([&]() -> int { return Report(cairn::Free(ptr)); });
}

const char* cairn_strerror(int err) {
  switch (err) {
    case CAIRN_OK: return "success";
#define CAIRN_ERROR(c, cpp, value, name, text, py) \
  case CAIRN_ERR_##c:                              \
    return text;
#include "cairn/cairn_errors.def"
#undef CAIRN_ERROR
    default: return "unknown error code";
  }
}

const char* cairn_last_error(void) { return g_last_error.c_str(); }

int cairn_stats(cairn_client_t* c, cairn_stats_t* out) {
  return Guard([&]() -> int {
    if (c == nullptr) return InvalidHandle("client");
    if (out == nullptr) return InvalidHandle("out");
    // Read size without assuming the caller's struct is any longer than it.
    uint64_t size = 0;
    std::memcpy(&size, out, sizeof size);
    if (size < sizeof size) {
      return Report(cairn::Status::InvalidArgument(
          "cairn_stats: out->size is " + std::to_string(size) +
          "; set it to sizeof(cairn_stats_t) (or initialize with CAIRN_STATS_INIT) before the call"));
    }
    const cairn::Stats s = c->client->GetStats();
    cairn_stats_t full{};
#define CAIRN_STAT(kind, name, expr, doc) full.name = static_cast<decltype(full.name)>(expr);
#include "cairn/cairn_stats.def"
#undef CAIRN_STAT
    // An older caller's struct is a prefix of ours: fill only what it has.
    const size_t n = size < sizeof full ? static_cast<size_t>(size) : sizeof full;
    full.size = n;
    std::memcpy(out, &full, n);
    return CAIRN_OK;
  });
}

}  // extern "C"
