// Memory borrowed from Python objects (borrowed.hpp).
#include "borrowed.hpp"

#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "errors.hpp"

namespace cairn::python {
namespace {

// DLPack device types (dlpack.h): host memory the CPU can address directly,
// and CUDA device and managed memory (the core's GPU tier moves those).
constexpr int kDLCPU = 1;
constexpr int kDLCUDA = 2;
constexpr int kDLCUDAHost = 3;
constexpr int kDLCUDAManaged = 13;

}  // namespace

std::string TypeName(nb::handle obj) {
  return nb::cast<std::string>(
      nb::str(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr()))).attr("__qualname__")));
}

Borrowed Borrowed::Get(nb::handle obj, bool writable, const char* what) {
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

void Borrowed::GetBuffer(nb::handle obj, bool writable, const char* what) {
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

bool Borrowed::Contiguous(const nb::ndarray<nb::ro>& a) {
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

void Borrowed::CheckDevice(nb::handle obj, int device_type, const char* what) {
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
void Borrowed::GetCudaArrayInterface(nb::handle obj, bool writable, const char* what) {
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
    if (nb::object version = item("version");
        !version.is_none() && nb::cast<int64_t>(version) > 3) {
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

void Borrowed::GetDLPack(nb::handle obj, bool writable, const char* what) {
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

}  // namespace cairn::python
