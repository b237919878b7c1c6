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
//  * Memory comes from the buffer protocol (numpy, bytearray, memoryview, ...)
//    or from DLPack (torch tensors, ...). A protected region keeps its
//    Py_buffer / DLPack import alive until unprotect() or close(), and a
//    region is only released once no checkpoint or restore can still be
//    reading or writing it (regions_guard_).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <utility>
#include <variant>

#include "cairn/cairn.hpp"
#include "cairn/config.hpp"

namespace nb = nanobind;

namespace {

// ---------------------------------------------------------------------------
// Errors

[[noreturn]] void Raise(int code, const std::string& message) {
  nb::object errors = nb::module_::import_("cairn._errors");
  nb::object exc = errors.attr("_from_status")(code, message);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw nb::python_error();
}

[[noreturn]] void Raise(const cairn::Status& s) { Raise(static_cast<int>(s.code()), s.message()); }

void Check(const cairn::Status& s) {
  if (!s.ok()) Raise(s);
}

template <typename T>
T Value(cairn::Result<T> r) {
  if (!r.ok()) Raise(r.status());
  return std::move(r).value();
}

// Runs fn() with the GIL released; returns what it returns.
template <typename Fn>
auto WithoutGil(Fn&& fn) -> decltype(fn()) {
  std::optional<decltype(fn())> out;
  {
    nb::gil_scoped_release release;
    out.emplace(fn());
  }
  return std::move(*out);
}

[[noreturn]] void InvalidArgument(const std::string& message) {
  Raise(static_cast<int>(cairn::Code::kInvalidArgument), message);
}

// ---------------------------------------------------------------------------
// Borrowed memory

struct PyBufferDeleter {
  void operator()(Py_buffer* view) const {
    PyBuffer_Release(view);
    delete view;
  }
};
using PyBufferPtr = std::unique_ptr<Py_buffer, PyBufferDeleter>;

// DLPack device types (dlpack.h): memory the CPU can address directly.
constexpr int kDLCPU = 1;
constexpr int kDLCUDAHost = 3;

std::string TypeName(nb::handle obj) {
  return nb::cast<std::string>(nb::str(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr())))
                                           .attr("__qualname__")));
}

// A contiguous host memory range of a Python object, kept valid while this
// object lives. Destroy it with the GIL held.
class Borrowed {
 public:
  // `what` names the call in error messages ("protect", "history push").
  static Borrowed Get(nb::handle obj, bool writable, const char* what) {
    Borrowed b;
    if (PyObject_CheckBuffer(obj.ptr())) {
      b.GetBuffer(obj, writable, what);
    } else if (nb::hasattr(obj, "__dlpack__")) {
      b.GetDLPack(obj, writable, what);
    } else {
      InvalidArgument(std::string(what) + ": expected a " + (writable ? "writable " : "") +
                      "buffer (numpy array, bytearray, memoryview) or a DLPack tensor, got " +
                      TypeName(obj));
    }
    return b;
  }

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void GetBuffer(nb::handle obj, bool writable, const char* what) {
    PyBufferPtr view(new Py_buffer{});
    if (PyObject_GetBuffer(obj.ptr(), view.get(), PyBUF_RECORDS_RO) != 0) {
      // Keep Python's own message (e.g. "memoryview: underlying buffer is not
      // C-contiguous") but raise our error class.
      nb::python_error err;
      InvalidArgument(std::string(what) + ": cannot get a buffer from " + TypeName(obj) + ": " +
                      err.what());
    }
    // On error, `view` is released (with the GIL) as the exception unwinds.
    if (writable && view->readonly) {
      InvalidArgument(std::string(what) + ": the " + TypeName(obj) +
                      " is read-only; Cairn needs writable memory to restore into "
                      "(for numpy: arr.flags.writeable, or pass a copy)");
    }
    if (!PyBuffer_IsContiguous(view.get(), 'A')) {
      InvalidArgument(std::string(what) + ": the " + TypeName(obj) +
                      " is not contiguous; pass a contiguous array (numpy.ascontiguousarray) "
                      "and keep a reference to it");
    }
    data_ = view->buf;
    bytes_ = static_cast<size_t>(view->len);
    holder_ = std::move(view);
  }

  static bool Contiguous(const nb::ndarray<nb::ro>& a) {
    if (a.stride_ptr() == nullptr || a.size() <= 1) return true;
    bool c = true, f = true;
    int64_t accum = 1;
    for (size_t i = a.ndim(); i-- > 0;) {
      c = c && (a.shape(i) == 1 || a.stride(i) == accum);
      accum *= static_cast<int64_t>(a.shape(i));
    }
    accum = 1;
    for (size_t i = 0; i < a.ndim(); ++i) {
      f = f && (a.shape(i) == 1 || a.stride(i) == accum);
      accum *= static_cast<int64_t>(a.shape(i));
    }
    return c || f;
  }

  static void CheckDevice(nb::handle obj, int device_type, const char* what) {
    if (device_type == kDLCPU || device_type == kDLCUDAHost) return;
    Raise(static_cast<int>(cairn::Code::kUnsupported),
          std::string(what) + ": the " + TypeName(obj) + " lives in device memory (DLPack device type " +
              std::to_string(device_type) +
              "); GPU tier not available in this build: copy it to host memory first "
              "(e.g. tensor.cpu())");
  }

  void GetDLPack(nb::handle obj, bool writable, const char* what) {
    // Ask for the device first: exporting a device tensor may synchronize
    // streams, and a clear error beats a failed import.
    if (nb::hasattr(obj, "__dlpack_device__")) {
      nb::object dev = obj.attr("__dlpack_device__")();
      CheckDevice(obj, nb::cast<int>(dev[0]), what);
    }
    nb::ndarray<nb::ro> ro;
    if (writable) {
      nb::ndarray<> rw;
      // convert=false: never a silent copy (which would not be the caller's memory).
      if (nb::try_cast(obj, rw, /*convert=*/false)) {
        ro = nb::ndarray<nb::ro>(rw);
        holder_ = std::move(rw);
      } else if (nb::try_cast(obj, ro, /*convert=*/false)) {
        InvalidArgument(std::string(what) + ": the " + TypeName(obj) +
                        " is read-only; Cairn needs writable memory to restore into");
      }
    } else if (nb::try_cast(obj, ro, /*convert=*/false)) {
      holder_ = ro;
    }
    if (!ro.is_valid()) {
      InvalidArgument(std::string(what) + ": could not import the " + TypeName(obj) +
                      " through DLPack (for torch: detach() tensors that require grad)");
    }
    CheckDevice(obj, ro.device_type(), what);
    if (!Contiguous(ro)) {
      InvalidArgument(std::string(what) + ": the " + TypeName(obj) +
                      " is not contiguous; pass a contiguous tensor (.contiguous()) and keep a "
                      "reference to it");
    }
    data_ = const_cast<void*>(static_cast<const void*>(ro.data()));
    bytes_ = ro.nbytes();
  }

  std::variant<std::monostate, PyBufferPtr, nb::ndarray<>, nb::ndarray<nb::ro>> holder_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

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
  void Protect(int id, nb::handle obj, bool writable) {
    auto b = std::make_unique<Borrowed>(Borrowed::Get(obj, writable, "protect"));
    Check(WithoutGil([&] {
      std::unique_lock guard(regions_guard_);
      return client_->Protect(id, b->data(), b->bytes());
    }));
    std::swap(regions_[id], b);  // the region it replaces is released with `b`
  }

  void Unprotect(int id) {
    Check(WithoutGil([&] {
      std::unique_lock guard(regions_guard_);  // waits for checkpoints/restores
      return client_->Unprotect(id);
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

  std::optional<int64_t> Latest(const std::string& name) {
    cairn::Result<int64_t> r = WithoutGil([&] { return client_->Latest(name); });
    if (!r.ok() && r.status().code() == cairn::Code::kNotFound) return std::nullopt;
    return Value(std::move(r));
  }

  void Restore(const std::string& name, int64_t version) {
    Check(WithoutGil([&] {
      std::shared_lock guard(regions_guard_);
      return client_->Restore(name, version);
    }));
  }

  PyHistory* OpenHistory(const std::string& name) {
    return new PyHistory(Value(WithoutGil([&] { return client_->OpenHistory(name); })));
  }

  nb::dict Stats() const {
    cairn::Stats st = client_->GetStats();
    nb::dict d;
    auto tier = [&](const char* prefix, const cairn::TierStats& t) {
      std::string p(prefix);
      d[(p + "_bytes").c_str()] = t.bytes;
      d[(p + "_ops").c_str()] = t.ops;
      d[(p + "_seconds").c_str()] = t.seconds;
    };
    tier("capture", st.capture);
    tier("flush_local", st.flush_local);
    tier("flush_persistent", st.flush_persistent);
    tier("prefetch", st.prefetch);
    tier("restore", st.restore);
    d["cache_hits"] = st.cache_hits;
    d["cache_misses"] = st.cache_misses;
    d["prefetch_waits"] = st.prefetch_waits;
    d["evictions"] = st.evictions;
    d["flushes_skipped"] = st.flushes_skipped;
    d["failed_flushes"] = st.failed_flushes;
    d["capture_blocked_seconds"] = st.capture_blocked_s;
    d["cache_capacity_bytes"] = st.cache_capacity_bytes;
    d["cache_used_bytes"] = st.cache_used_bytes;
    d["cache_dirty_bytes"] = st.cache_dirty_bytes;
    // Fast initialization (cairn::InitStats); times < 0 = not yet.
    d["init_strategy"] = cairn::CacheInitName(st.init.strategy);
    d["init_open_seconds"] = st.init.open_s;
    d["init_fully_touched_seconds"] = st.init.fully_touched_s;
    d["init_pinned_seconds"] = st.init.pinned_s;
    d["init_pin_error"] = st.init.pin_error;
    d["init_touched_bytes"] = st.init.touched_bytes;
    d["capture_untouched_bytes"] = st.init.capture_untouched_bytes;
    d["capture_touched_bytes"] = st.init.capture_touched_bytes;
    d["capture_pinned_bytes"] = st.init.capture_pinned_bytes;
    d["init_mode_switches"] = st.init.mode_switches;
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

  nb::class_<cairn::Config>(m, "Config", "cairn::Config (include/cairn/config.hpp).")
      .def_rw("scratch_dir", &cairn::Config::scratch_dir)
      .def_rw("persistent_dir", &cairn::Config::persistent_dir)
      .def_rw("file_mode", &cairn::Config::file_mode)
      .def_rw("direct_io", &cairn::Config::direct_io)
      .def_rw("fsync", &cairn::Config::fsync)
      .def_rw("host_cache_bytes", &cairn::Config::host_cache_bytes)
      .def_rw("block_bytes", &cairn::Config::block_bytes)
      .def_rw("copy_threads", &cairn::Config::copy_threads)
      .def_rw("keep_versions", &cairn::Config::keep_versions)
      .def_rw("prefetch_depth", &cairn::Config::prefetch_depth)
      .def_rw("history_persistent", &cairn::Config::history_persistent)
      .def_rw("trace_path", &cairn::Config::trace_path)
      .def_prop_rw(
          "init", [](const cairn::Config& c) { return std::string(cairn::CacheInitName(c.init)); },
          [](cairn::Config& c, const std::string& name) { c.init = Value(cairn::ParseCacheInit(name)); })
      .def_rw("huge_pages", &cairn::Config::huge_pages)
      .def_rw("pin", &cairn::Config::pin)
      .def_rw("pin_serialize", &cairn::Config::pin_serialize)
      .def_rw("pin_lock_path", &cairn::Config::pin_lock_path)
      .def("validate", [](const cairn::Config& c) { Check(c.Validate()); });

  nb::class_<PyHistory>(m, "History")
      .def("push", &PyHistory::Push, nb::arg("step"), nb::arg("data"))
      .def("pop", &PyHistory::Pop, nb::arg("step"), nb::arg("out"))
      .def("step_size", &PyHistory::StepSize, nb::arg("step"))
      .def("close", &PyHistory::Close);

  nb::class_<PyClient>(m, "Client")
      .def(nb::init<const cairn::Config&>(), nb::arg("config"))
      .def("protect", &PyClient::Protect, nb::arg("id"), nb::arg("obj"), nb::arg("writable") = true)
      .def("unprotect", &PyClient::Unprotect, nb::arg("id"))
      .def("checkpoint", &PyClient::Checkpoint, nb::arg("name"), nb::arg("version"))
      .def("wait", &PyClient::Wait, nb::arg("name"), nb::arg("version"), nb::arg("level"))
      .def("latest", &PyClient::Latest, nb::arg("name"))
      .def("restore", &PyClient::Restore, nb::arg("name"), nb::arg("version"))
      .def("open_history", &PyClient::OpenHistory, nb::arg("name"), nb::rv_policy::take_ownership)
      .def("stats", &PyClient::Stats)
      .def("close", &PyClient::Close)
      .def("config", &PyClient::config, nb::rv_policy::copy);
}
