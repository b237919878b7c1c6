#include "common/parse.hpp"

#include <cerrno>
#include <cstdlib>

#include "cairn/config.hpp"

namespace cairn::bench {

Status Bad(std::string_view option, std::string_view why) {
  return Status::InvalidArgument(std::string(option) + ": " + std::string(why));
}

Result<uint64_t> ParseCount(std::string_view opt, const std::string& v, uint64_t min) {
  if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos) {
    return Bad(opt, "expected a whole number, got '" + v + "'");
  }
  errno = 0;
  const unsigned long long n = std::strtoull(v.c_str(), nullptr, 10);
  if (errno == ERANGE || n > (1ull << 40)) return Bad(opt, "'" + v + "' is too large");
  if (n < min) return Bad(opt, "must be at least " + std::to_string(min));
  return static_cast<uint64_t>(n);
}

Result<uint64_t> ParseBytes(std::string_view opt, const std::string& v) {
  Result<uint64_t> r = ParseSize(v);
  if (!r.ok()) return Bad(opt, "expected a size such as 64MiB, got '" + v + "'");
  if (*r == 0) return Bad(opt, "must be greater than 0");
  return *r;
}

}  // namespace cairn::bench
