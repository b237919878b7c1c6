#pragma once
// cairn.set_log (log.cpp).

#include <nanobind/nanobind.h>

namespace cairn::python {

void BindLog(nanobind::module_& m);

}  // namespace cairn::python
