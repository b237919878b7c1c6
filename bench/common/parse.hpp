// Option values shared by cairn-bench (options.cpp) and cairn-bench-mpi
// (mpi_main.cpp). Every problem is a kInvalidArgument naming the option.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "cairn/status.hpp"

namespace cairn::bench {

// "option: why".
Status Bad(std::string_view option, std::string_view why);
// A whole number >= min (at most 2^40).
Result<uint64_t> ParseCount(std::string_view opt, const std::string& v, uint64_t min);
// A size such as 64MiB (cairn::ParseSize), > 0.
Result<uint64_t> ParseBytes(std::string_view opt, const std::string& v);

}  // namespace cairn::bench
