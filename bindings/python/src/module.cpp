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
#include <vector>

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

// DLPack device types (dlpack.h): host memory the CPU can address directly,
// and CUDA device and managed memory (the core's GPU tier moves those).
constexpr int kDLCPU = 1;
constexpr int kDLCUDA = 2;
constexpr int kDLCUDAHost = 3;
constexpr int kDLCUDAManaged = 13;

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
    } else if (nb::hasattr(obj, "__cuda_array_interface__")) {
      b.GetCudaArrayInterface(obj, writable, what);
    } else if (nb::hasattr(obj, "__dlpack__")) {
      b.GetDLPack(obj, writable, what);
    } else {
      InvalidArgument(std::string(what) + ": expected a " + (writable ? "writable " : "") +
                      "buffer (numpy array, bytearray, memoryview), a CUDA array "
                      "(__cuda_array_interface__) or a DLPack tensor, got " +
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
    if (device_type == kDLCPU || device_type == kDLCUDAHost || device_type == kDLCUDA ||
        device_type == kDLCUDAManaged) {
      return;
    }
    Raise(static_cast<int>(cairn::Code::kUnsupported),
          std::string(what) + ": the " + TypeName(obj) + " lives in memory of DLPack device type " +
              std::to_string(device_type) +
              "; Cairn takes host (CPU), CUDA and CUDA managed memory only: copy it to one of "
              "those first (e.g. tensor.cpu())");
  }

  // __cuda_array_interface__ (versions 0 to 3; numba's specification): a dict
  // with "shape", "typestr", "data": (pointer, read_only), optional "strides"
  // (None = C-contiguous), "mask" (must be None) and "stream" (Cairn copies on
  // its own streams: the producer's work must be finished, as for host memory).
  void GetCudaArrayInterface(nb::handle obj, bool writable, const char* what) {
    const std::string prefix = std::string(what) + ": the " + TypeName(obj);
    nb::object cai_obj = obj.attr("__cuda_array_interface__");
    if (!nb::isinstance<nb::dict>(cai_obj)) {
      InvalidArgument(prefix + "'s __cuda_array_interface__ is not a dict");
    }
    nb::dict cai = nb::borrow<nb::dict>(cai_obj);
    auto item = [&](const char* key) -> nb::object {
      return cai.contains(key) ? nb::object(cai[key]) : nb::none();
    };
    try {
      if (nb::object version = item("version"); !version.is_none() && nb::cast<int64_t>(version) > 3) {
        InvalidArgument(prefix + " has __cuda_array_interface__ version " +
                        std::to_string(nb::cast<int64_t>(version)) + "; Cairn reads versions 0 to 3");
      }
      if (!item("mask").is_none()) {
        InvalidArgument(prefix + " is a masked CUDA array; pass its data without a mask");
      }
      nb::object data = item("data");
      nb::object shape = item("shape");
      nb::object typestr = item("typestr");
      if (data.is_none() || shape.is_none() || typestr.is_none()) {
        InvalidArgument(prefix + "'s __cuda_array_interface__ lacks data, shape or typestr");
      }
      const uintptr_t ptr = nb::cast<uintptr_t>(data[0]);
      const bool read_only = nb::cast<bool>(data[1]);
      const std::string type = nb::cast<std::string>(typestr);
      // "<f4", "|u1", "<c16": byte order, kind, item size in bytes.
      int64_t itemsize = 0;
      for (size_t i = 2; i < type.size() && type[i] >= '0' && type[i] <= '9'; ++i) {
        itemsize = itemsize * 10 + (type[i] - '0');
      }
      if (type.size() < 3 || itemsize <= 0) {
        InvalidArgument(prefix + " has an unknown typestr '" + type + "'");
      }
      std::vector<int64_t> dims;
      for (nb::handle d : shape) dims.push_back(nb::cast<int64_t>(d));
      int64_t count = 1;
      for (int64_t d : dims) {
        if (d < 0) InvalidArgument(prefix + " has a negative dimension");
        count *= d;
      }
      if (writable && read_only) {
        InvalidArgument(prefix + " is read-only; Cairn needs writable memory to restore into");
      }
      if (nb::object strides = item("strides"); !strides.is_none() && count > 1) {
        std::vector<int64_t> st;
        for (nb::handle x : strides) st.push_back(nb::cast<int64_t>(x));
        bool c = st.size() == dims.size(), f = c;
        int64_t accum = itemsize;
        for (size_t i = dims.size(); c && i-- > 0;) {
          c = dims[i] == 1 || st[i] == accum;
          accum *= dims[i];
        }
        accum = itemsize;
        for (size_t i = 0; f && i < dims.size(); ++i) {
          f = dims[i] == 1 || st[i] == accum;
          accum *= dims[i];
        }
        if (!c && !f) {
          InvalidArgument(prefix +
                          " is not contiguous; pass a contiguous array (cupy.ascontiguousarray, "
                          ".contiguous()) and keep a reference to it");
        }
      }
      data_ = reinterpret_cast<void*>(ptr);
      bytes_ = static_cast<size_t>(count * itemsize);
    } catch (const nb::cast_error&) {
      InvalidArgument(prefix + " has a malformed __cuda_array_interface__");
    } catch (const nb::python_error& e) {
      if (e.matches(PyExc_IndexError) || e.matches(PyExc_TypeError)) {
        InvalidArgument(prefix + " has a malformed __cuda_array_interface__");
      }
      throw;
    }
    holder_ = nb::borrow<nb::object>(obj);  // the exporter owns the memory
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

  std::variant<std::monostate, PyBufferPtr, nb::ndarray<>, nb::ndarray<nb::ro>, nb::object> holder_;
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
    // The GPU tier (cairn::DeviceStats); times < 0 = not yet.
    const cairn::DeviceStats& dev = st.device;
    d["device_gpu"] = dev.gpu;
    d["device_init"] = cairn::DeviceCacheInitName(dev.init);
    d["device_capacity_bytes"] = dev.capacity_bytes;
    d["device_mapped_bytes"] = dev.mapped_bytes;
    d["device_fully_mapped_seconds"] = dev.fully_mapped_s;
    d["device_map_error"] = dev.map_error;
    tier("device_capture", dev.capture);
    tier("device_drain", dev.drain);
    tier("device_prefetch", dev.prefetch);
    d["device_hits"] = dev.hits;
    d["device_evictions"] = dev.evictions;
    d["device_capture_blocked_seconds"] = dev.capture_blocked_s;
    d["device_bounce_bytes"] = dev.bounce_bytes;
    d["device_used_bytes"] = dev.used_bytes;
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
      .def_rw("device_cache_bytes", &cairn::Config::device_cache_bytes)
      .def_prop_rw(
          "device_cache_init",
          [](const cairn::Config& c) { return std::string(cairn::DeviceCacheInitName(c.device_cache_init)); },
          [](cairn::Config& c, const std::string& name) {
            c.device_cache_init = Value(cairn::ParseDeviceCacheInit(name));
          })
      .def_rw("device_map_chunk_bytes", &cairn::Config::device_map_chunk_bytes)
      .def_rw("device", &cairn::Config::device)
      .def_rw("bounce_buffers", &cairn::Config::bounce_buffers)
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
