// cairn._cairn: the nanobind extension under the Python package `cairn`.
//
// A thin layer over the C++ API (include/cairn/cairn.hpp). The typed,
// documented user API is the pure-Python package around it
// (bindings/python/cairn/); this module's signatures are in _cairn.pyi.
//
// Rules kept here:
//  * Every call that may block (open, close, checkpoint, wait, latest,
//    restore, history open/push/pop/close) releases the GIL around the C++
//    call. Python objects are only touched with the GIL held.
//  * A failed Status becomes an exception of cairn._errors (Error subclasses
//    carrying the C error code), built by cairn._errors._from_status.
//  * Memory comes from the buffer protocol (numpy, bytearray, memoryview, ...),
//    from __cuda_array_interface__ (CuPy, numba, torch CUDA tensors) or from
//    DLPack (torch tensors, ...; CPU, CUDA and CUDA managed devices). Device
//    pointers are passed to the core like host ones: it asks the CUDA driver
//    what the memory is (docs/gpu.md). A protected region keeps its Py_buffer
//    / DLPack import / exporting object alive until unprotect() or close(), and a
//    region is only released once no checkpoint or restore can still be
//    reading or writing it (regions_guard_).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "borrowed.hpp"
#include "cairn/cairn.hpp"
#include "cairn/config.hpp"
#include "errors.hpp"
#include "log.hpp"
#include "mpi_group.hpp"

namespace nb = nanobind;

namespace {

using cairn::python::Borrowed;
using cairn::python::Check;
using cairn::python::InvalidArgument;
using cairn::python::Raise;
using cairn::python::Value;
using cairn::python::WithoutGil;

// ---------------------------------------------------------------------------
// The tables (include/cairn/*.def), for the Python package to derive from

#define CAIRN_STAT_IS_FLAG_U64 false
#define CAIRN_STAT_IS_FLAG_F64 false
#define CAIRN_STAT_IS_FLAG_WHEN false
#define CAIRN_STAT_IS_FLAG_RATIO false
#define CAIRN_STAT_IS_FLAG_ENUM false
#define CAIRN_STAT_IS_FLAG_FLAG true

template <bool kFlag, typename T>
nb::object StatValue(T v) {
  if constexpr (kFlag) {
    return nb::bool_(v != 0);
  } else if constexpr (std::is_enum_v<T>) {
    return nb::int_(static_cast<int>(v));  // cairn._client names it
  } else {
    return nb::cast(v);
  }
}

// [(name, kind, doc)] of cairn_stats.def; kind "TEXT" for the texts.
nb::list StatsFields() {
  nb::list out;
#define CAIRN_STAT(kind, name, expr, doc) out.append(nb::make_tuple(#name, #kind, doc));
#define CAIRN_STAT_TEXT(name, expr, doc) out.append(nb::make_tuple(#name, "TEXT", doc));
#include "cairn/cairn_stats.def"
#undef CAIRN_STAT_TEXT
#undef CAIRN_STAT
  return out;
}

// The kind of value a Config member holds, by its type; a string member is
// a path when its name says so (scratch_dir, trace_path, ...), else a word
// that the C++ Validate checks (restart.placement, host_cache.numa, ...).
template <typename T>
constexpr const char* KindOf(std::string_view member) {
  if constexpr (std::is_same_v<T, std::string>) {
    return member.ends_with("_dir") || member.ends_with("_path") ? "path" : "word";
  }
  else if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (std::is_same_v<T, int>) return "int";
  else if constexpr (std::is_same_v<T, uint64_t>) return "size";
  else if constexpr (std::is_same_v<T, uint32_t>) return "mode";
  else if constexpr (std::is_same_v<T, cairn::CacheInit>) return "init";
  else if constexpr (std::is_same_v<T, cairn::DeviceCacheInit>) return "device_init";
  else if constexpr (std::is_same_v<T, cairn::ChangeDetection>) return "changes";
  else if constexpr (std::is_same_v<T, cairn::CaptureMode>) return "capture";
  else if constexpr (std::is_same_v<T, cairn::WriteProtectMode>) return "write_protect";
  else if constexpr (std::is_same_v<T, cairn::L3Code>)
    return "l3_code";
  else if constexpr (std::is_same_v<T, double>) return "number";
  else static_assert(sizeof(T) == 0, "a Config member of a type the Python package does not know");
}

// [(keyword, Config attribute, "section.key", environment variable, kind)] of
// config_keys.def; kind: path, word, bool, int, size, mode, init, device_init, changes,
// capture, write_protect, l3_code, number.
nb::list ConfigKeys() {
  nb::list out;
#define CAIRN_CONFIG_KEY(section, key, member, lo, env, py, type, dflt, doc) \
  out.append(nb::make_tuple(#py, #member, #section "." #key, env, KindOf<decltype(cairn::Config::member)>(#member)));
#include "cairn/config_keys.def"
#undef CAIRN_CONFIG_KEY
  return out;
}

// [(code, "CAIRN_ERR_...", Python class name)] of cairn_errors.def.
nb::list ErrorCodes() {
  nb::list out;
#define CAIRN_ERROR(c, cpp, value, name, text, py) \
  out.append(nb::make_tuple(value, "CAIRN_ERR_" #c, #py));
#include "cairn/cairn_errors.def"
#undef CAIRN_ERROR
  return out;
}

// Config members: plain ones read and write as they are; the enums as their
// names ("adaptive", "incremental", "hash").
template <typename T>
void BindMember(nb::class_<cairn::Config>& cls, const char* name, T cairn::Config::*member) {
  cls.def_rw(name, member);
}

// An enum member as its name: name_of(E) -> const char*, parse(string) -> Result<E>.
template <typename E, typename NameOf, typename Parse>
void BindEnum(nb::class_<cairn::Config>& cls, const char* name, E cairn::Config::*member, NameOf name_of,
              Parse parse) {
  cls.def_prop_rw(
      name, [member, name_of](const cairn::Config& c) { return std::string(name_of(c.*member)); },
      [member, parse](cairn::Config& c, const std::string& v) { c.*member = Value(parse(v)); });
}

void BindMember(nb::class_<cairn::Config>& cls, const char* name, cairn::CacheInit cairn::Config::*member) {
  BindEnum(cls, name, member, cairn::CacheInitName, cairn::ParseCacheInit);
}

void BindMember(nb::class_<cairn::Config>& cls, const char* name,
                cairn::DeviceCacheInit cairn::Config::*member) {
  BindEnum(cls, name, member, cairn::DeviceCacheInitName, cairn::ParseDeviceCacheInit);
}

void BindMember(nb::class_<cairn::Config>& cls, const char* name,
                cairn::ChangeDetection cairn::Config::*member) {
  BindEnum(cls, name, member, cairn::ChangeDetectionName, cairn::ParseChangeDetection);
}

void BindMember(nb::class_<cairn::Config>& cls, const char* name, cairn::CaptureMode cairn::Config::*member) {
  BindEnum(cls, name, member, cairn::CaptureModeName, cairn::ParseCaptureMode);
}

void BindMember(nb::class_<cairn::Config>& cls, const char* name,
                cairn::WriteProtectMode cairn::Config::*member) {
  BindEnum(cls, name, member, cairn::WriteProtectModeName, cairn::ParseWriteProtectMode);
}

void BindMember(nb::class_<cairn::Config>& cls, const char* name,
                cairn::L3Code cairn::Config::*member) {
  BindEnum(cls, name, member, cairn::L3CodeName, cairn::ParseL3Code);
}

// ---------------------------------------------------------------------------
// Client and History

// At interpreter exit the GIL must not be released (other threads may be gone).
bool Finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

cairn::Level ToLevel(int level) {
  if (level < 0 || level > 2) InvalidArgument("unknown level " + std::to_string(level));
  return static_cast<cairn::Level>(level);
}

class PyHistory {
 public:
  explicit PyHistory(std::unique_ptr<cairn::History> h) : h_(std::move(h)) {}
  ~PyHistory() {
    if (h_ && !Finalizing()) {
      nb::gil_scoped_release release;
      h_.reset();
    }
  }

  void Push(int64_t step, nb::handle obj) {
    Borrowed b = Borrowed::Get(obj, /*writable=*/false, "history push");
    Check(WithoutGil([&] { return h_->Push(step, b.data(), b.bytes()); }));
  }

  size_t Pop(int64_t step, nb::handle out) {
    Borrowed b = Borrowed::Get(out, /*writable=*/true, "history pop");
    return Value(WithoutGil([&] { return h_->Pop(step, b.data(), b.bytes()); }));
  }

  size_t StepSize(int64_t step) const { return Value(h_->StepSize(step)); }

  void Close() {
    Check(WithoutGil([&] { return h_->Close(); }));
  }

 private:
  std::unique_ptr<cairn::History> h_;
};

class PyClient {
 public:
  explicit PyClient(const cairn::Config& config)
      : client_(Value(WithoutGil([&] { return cairn::Client::Open(config); }))) {}

  // cairn.Client(comm=...): collective over the communicator (mpi_group.cpp).
  // config is None when this rank's configuration failed to load (code and
  // message say why), so that every rank still takes part and fails alike.
  static PyClient* OpenMpi(std::optional<cairn::Config> config, int error_code, const std::string& error,
                           int fcomm, const std::string& library) {
    cairn::Result<cairn::Config> c =
        config ? cairn::Result<cairn::Config>(*config)
               : cairn::Result<cairn::Config>(cairn::Status(static_cast<cairn::Code>(error_code), error));
    return new PyClient(
        Value(WithoutGil([&] { return cairn_py::OpenMpiClient(std::move(c), fcomm, library); })));
  }

  explicit PyClient(std::unique_ptr<cairn::Client> client) : client_(std::move(client)) {}

  ~PyClient() {
    if (!client_) return;
    if (Finalizing()) {
      (void)client_->Close();
    } else {
      nb::gil_scoped_release release;
      std::unique_lock guard(regions_guard_);
      (void)client_->Close();
    }
    regions_.clear();  // with the GIL, after the pipeline stopped
  }

  // writable=false is for Client.save(), which only checkpoints the region.
  // changes: the region's checkpoint.changes ("full", "hash", ...); None:
  // the client's.
  void Protect(int id, nb::handle obj, bool writable, std::optional<std::string> changes,
               bool reserve) {
    cairn::ProtectOptions options{.reserve_cache = reserve};
    if (changes) {
      auto mode = cairn::ParseChangeDetection(*changes);
      if (!mode.ok()) {
        Check(cairn::Status::InvalidArgument("protect region " + std::to_string(id) + ": changes: " +
                                             mode.status().message()));
      }
      options.changes = *mode;
    }
    auto b = std::make_unique<Borrowed>(Borrowed::Get(obj, writable, "protect"));
    Check(WithoutGil([&] {
      std::unique_lock guard(regions_guard_);
      return client_->Protect(id, b->data(), b->bytes(), options);
    }));
    std::swap(regions_[id], b);  // the region it replaces is released with `b`
  }

  // wait false: a zero-copy epoch may still read the memory; the Python
  // Client keeps the object alive until the next checkpoint call instead.
  void Unprotect(int id, bool wait) {
    Check(WithoutGil([&] {
      std::unique_lock guard(regions_guard_);  // waits for checkpoints/restores
      return client_->Unprotect(id, cairn::UnprotectOptions{.wait_for_reads = wait});
    }));
    regions_.erase(id);
  }

  void Checkpoint(const std::string& name, int64_t version) {
    Check(WithoutGil([&] {
      std::shared_lock guard(regions_guard_);
      return client_->Checkpoint(name, version);
    }));
  }

  void Wait(const std::string& name, int64_t version, int level) {
    cairn::Level l = ToLevel(level);
    Check(WithoutGil([&] { return client_->Wait(name, version, l); }));
  }

  bool CheckpointDue(const std::string& name) {
    return Value(WithoutGil([&] { return client_->CheckpointDue(name); }));
  }

  std::optional<int64_t> Latest(const std::string& name) {
    cairn::Result<int64_t> r = WithoutGil([&] { return client_->Latest(name); });
    if (!r.ok() && r.status().code() == cairn::Code::kNotFound) return std::nullopt;
    return Value(std::move(r));
  }

  void Restore(const std::string& name, int64_t version, bool shared_on_node) {
    Check(WithoutGil([&] {
      std::shared_lock guard(regions_guard_);
      return client_->Restore(name, version,
                              cairn::RestoreOptions{.shared_on_node = shared_on_node});
    }));
  }

  // Placement (docs/design.md): both act on the calling OS thread, which
  // stays the same with the GIL released.
  void RegisterThread(int index) {
    Check(WithoutGil([&] { return client_->RegisterThread(index); }));
  }
  void RestoreAffinity(int index) {
    Check(WithoutGil([&] { return client_->RestoreAffinity(index); }));
  }
  void BeginRestore() { Check(client_->BeginRestore()); }
  void EndRestore() { Check(client_->EndRestore()); }

  std::optional<int64_t> RestoreLatest(const std::string& name) {
    cairn::Result<int64_t> r = WithoutGil([&] {
      std::shared_lock guard(regions_guard_);
      return client_->RestoreLatest(name);
    });
    if (!r.ok() && r.status().code() == cairn::Code::kNotFound) return std::nullopt;
    return Value(std::move(r));
  }

  // A saved MPI job's ranks (docs/mpi.md, "Restarting on another number of
  // ranks"): this client is in no group, so it checks every saved rank.
  std::optional<std::pair<int64_t, int>> SavedLatest(const std::string& name) {
    auto r = WithoutGil([&] { return client_->SavedLatest(name); });
    if (!r.ok() && r.status().code() == cairn::Code::kNotFound) return std::nullopt;
    const cairn::Client::SavedVersion v = Value(std::move(r));
    return std::make_pair(v.version, v.ranks);
  }

  int SavedRanks(const std::string& name, int64_t version) {
    return Value(WithoutGil([&] { return client_->SavedRanks(name, version); }));
  }

  uint64_t SavedRegionSize(const std::string& name, int64_t version, int saved_rank, int region) {
    return Value(
        WithoutGil([&] { return client_->SavedRegionSize(name, version, saved_rank, region); }));
  }

  void ReadSavedRegion(const std::string& name, int64_t version, int saved_rank, int region,
                       nb::handle out, uint64_t offset) {
    Borrowed b = Borrowed::Get(out, /*writable=*/true, "read_saved_region");
    Check(WithoutGil([&] {
      return client_->ReadSavedRegion(name, version, saved_rank, region, offset, b.data(),
                                      b.bytes());
    }));
  }

  PyHistory* OpenHistory(const std::string& name) {
    return new PyHistory(Value(WithoutGil([&] { return client_->OpenHistory(name); })));
  }

  // Every row of cairn_stats.def by its name (FLAG rows as bool), and the texts.
  nb::dict Stats() const {
    const cairn::Stats s = client_->GetStats();
    nb::dict d;
#define CAIRN_STAT(kind, name, expr, doc) d[#name] = StatValue<CAIRN_STAT_IS_FLAG_##kind>(expr);
#define CAIRN_STAT_TEXT(name, expr, doc) d[#name] = std::string(expr);
#include "cairn/cairn_stats.def"
#undef CAIRN_STAT_TEXT
#undef CAIRN_STAT
    return d;
  }

  void Close() {
    cairn::Status s = WithoutGil([&] {
      std::unique_lock guard(regions_guard_);
      return client_->Close();
    });
    regions_.clear();
    Check(s);
  }

  const cairn::Config& config() const { return client_->config(); }

 private:
  // Held shared by checkpoint/restore (which read/write the regions' memory
  // with the GIL released) and exclusively by protect/unprotect/close, so a
  // region's memory is never released while Cairn may touch it. Only taken
  // with the GIL released.
  std::shared_mutex regions_guard_;
  std::map<int, std::unique_ptr<Borrowed>> regions_;  // guarded by the GIL
  std::unique_ptr<cairn::Client> client_;             // declared last: closed first
};

cairn::Config LoadConfig(const std::optional<std::string>& path) {
  return Value(cairn::LoadConfig(path ? path->c_str() : nullptr));
}

}  // namespace

NB_MODULE(_cairn, m) {
  m.doc() = "Cairn's C++ core (internal; use the `cairn` package).";
  // A client kept in a module global is destroyed late at exit; that is fine.
  nb::set_leak_warnings(false);

  m.def("load_config", &LoadConfig, nb::arg("path").none(),
        "Defaults, then the TOML file (None: $CAIRN_CONFIG or none), then CAIRN_* variables; "
        "validated.");
  m.def(
      "parse_size",
      [](const std::string& text) { return Value(cairn::ParseSize(text)); },
      nb::arg("text"), "'512MiB' -> 536870912 (docs/config.md, Sizes).");
  m.def("format_size", &cairn::FormatSize, nb::arg("bytes"), "536870912 -> '512 MiB'.");
  // Tracked memory (cairn_alloc): a 1-D uint8 numpy array that owns it; the
  // memory goes back (cairn_free) when the last view of it is gone.
  m.def(
      "alloc",
      [](size_t bytes) {
        cairn::Result<void*> p = cairn::Alloc(bytes);
        Check(p.status());
        nb::capsule owner(*p, [](void* q) noexcept { (void)cairn::Free(q); });
        size_t shape[1] = {bytes};
        return nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>(*p, 1, shape, owner);
      },
      nb::arg("bytes"), "cairn_alloc: zero-filled, page-aligned memory as a uint8 numpy array.");

  m.def("stats_fields", &StatsFields, "[(name, kind, doc)] of include/cairn/cairn_stats.def.");
  m.def("config_keys", &ConfigKeys,
        "[(keyword, attribute, TOML key, environment variable, kind)] of include/cairn/config_keys.def.");
  m.def("error_codes", &ErrorCodes, "[(code, C name, Python class)] of include/cairn/cairn_errors.def.");
  cairn::python::BindLog(m);

  nb::class_<cairn::Config> config(m, "Config", "cairn::Config (include/cairn/config.hpp).");
#define CAIRN_CONFIG_KEY(section, key, member, lo, env, py, type, dflt, doc) \
  BindMember(config, #member, &cairn::Config::member);
#include "cairn/config_keys.def"
#undef CAIRN_CONFIG_KEY
  config.def("validate", [](const cairn::Config& c) { Check(c.Validate()); });

  nb::class_<PyHistory>(m, "History")
      .def("push", &PyHistory::Push, nb::arg("step"), nb::arg("data"))
      .def("pop", &PyHistory::Pop, nb::arg("step"), nb::arg("out"))
      .def("step_size", &PyHistory::StepSize, nb::arg("step"))
      .def("close", &PyHistory::Close);

  nb::class_<PyClient>(m, "Client")
      .def(nb::init<const cairn::Config&>(), nb::arg("config"))
      .def_static("open_mpi", &PyClient::OpenMpi, nb::arg("config").none(), nb::arg("error_code"),
                  nb::arg("error"), nb::arg("fcomm"), nb::arg("library"), nb::rv_policy::take_ownership)
      .def("protect", &PyClient::Protect, nb::arg("id"), nb::arg("obj"), nb::arg("writable") = true,
           nb::arg("changes") = nb::none(), nb::arg("reserve") = true)
      .def("unprotect", &PyClient::Unprotect, nb::arg("id"), nb::arg("wait") = true)
      .def("checkpoint", &PyClient::Checkpoint, nb::arg("name"), nb::arg("version"))
      .def("wait", &PyClient::Wait, nb::arg("name"), nb::arg("version"), nb::arg("level"))
      .def("checkpoint_due", &PyClient::CheckpointDue, nb::arg("name"))
      .def("latest", &PyClient::Latest, nb::arg("name"))
      .def("restore_latest", &PyClient::RestoreLatest, nb::arg("name"))
      .def("restore", &PyClient::Restore, nb::arg("name"), nb::arg("version"),
           nb::arg("shared_on_node") = false)
      .def("register_thread", &PyClient::RegisterThread, nb::arg("index"))
      .def("restore_affinity", &PyClient::RestoreAffinity, nb::arg("index"))
      .def("begin_restore", &PyClient::BeginRestore)
      .def("end_restore", &PyClient::EndRestore)
      .def("saved_latest", &PyClient::SavedLatest, nb::arg("name"))
      .def("saved_ranks", &PyClient::SavedRanks, nb::arg("name"), nb::arg("version"))
      .def("saved_region_size", &PyClient::SavedRegionSize, nb::arg("name"), nb::arg("version"),
           nb::arg("saved_rank"), nb::arg("region"))
      .def("read_saved_region", &PyClient::ReadSavedRegion, nb::arg("name"), nb::arg("version"),
           nb::arg("saved_rank"), nb::arg("region"), nb::arg("out"), nb::arg("offset"))
      .def("open_history", &PyClient::OpenHistory, nb::arg("name"), nb::rv_policy::take_ownership)
      .def("stats", &PyClient::Stats)
      .def("close", &PyClient::Close)
      .def("config", &PyClient::config, nb::rv_policy::copy);
}
