// The CAIRN_* environment variables over a configuration: every key with a
// variable in include/cairn/config_keys.def, in the table's order, parsed as
// its TOML value is (values.hpp). Internal to libcairn.
#pragma once

#include "cairn/config.hpp"
#include "cairn/status.hpp"

namespace cairn::config_values {

// kConfig naming the variable and what is wrong with its value; c keeps the
// variables applied before it.
Status ApplyEnvironment(Config* c);

}  // namespace cairn::config_values
