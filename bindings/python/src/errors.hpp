// How the extension reports a failure and blocks (module.cpp's rules): a
// failed Status becomes an exception of cairn._errors, built by
// cairn._errors._from_status; a blocking call runs with the GIL released.
#pragma once

#include <nanobind/nanobind.h>

#include <optional>
#include <string>
#include <utility>

#include "cairn/status.hpp"

namespace cairn::python {

namespace nb = nanobind;

[[noreturn]] inline void Raise(int code, const std::string& message) {
  nb::object errors = nb::module_::import_("cairn._errors");
  nb::object exc = errors.attr("_from_status")(code, message);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw nb::python_error();
}

[[noreturn]] inline void Raise(const cairn::Status& s) {
  Raise(static_cast<int>(s.code()), s.message());
}

inline void Check(const cairn::Status& s) {
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

[[noreturn]] inline void InvalidArgument(const std::string& message) {
  Raise(static_cast<int>(cairn::Code::kInvalidArgument), message);
}

}  // namespace cairn::python
