// Memory the extension borrows from Python objects (module.cpp's rules):
// the buffer protocol (numpy, bytearray, memoryview, ...),
// __cuda_array_interface__ (CuPy, numba, torch CUDA tensors) and DLPack
// (torch tensors, ...; CPU, CUDA and CUDA managed devices). Device pointers
// are passed to the core like host ones: it asks the CUDA driver what the
// memory is (docs/gpu.md).
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <memory>
#include <string>
#include <variant>

namespace cairn::python {

namespace nb = nanobind;

struct PyBufferDeleter {
  void operator()(Py_buffer* view) const {
    PyBuffer_Release(view);
    delete view;
  }
};
using PyBufferPtr = std::unique_ptr<Py_buffer, PyBufferDeleter>;

// The Python type name of obj, for error messages.
std::string TypeName(nb::handle obj);

// A contiguous memory range of a Python object, kept valid while this
// object lives. Destroy it with the GIL held.
class Borrowed {
 public:
  // `what` names the call in error messages ("protect", "history push").
  static Borrowed Get(nb::handle obj, bool writable, const char* what);

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void GetBuffer(nb::handle obj, bool writable, const char* what);
  static bool Contiguous(const nb::ndarray<nb::ro>& a);
  static void CheckDevice(nb::handle obj, int device_type, const char* what);
  void GetCudaArrayInterface(nb::handle obj, bool writable, const char* what);
  void GetDLPack(nb::handle obj, bool writable, const char* what);

  std::variant<std::monostate, PyBufferPtr, nb::ndarray<>, nb::ndarray<nb::ro>, nb::object> holder_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace cairn::python
