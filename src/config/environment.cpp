// The CAIRN_* variables over a configuration (environment.hpp).
#include "config/environment.hpp"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "config/values.hpp"

namespace cairn::config_values {
namespace {

// One parser per member type, as for the file; `name` is the variable.
Status FromEnv(const char* name, const char* v, int64_t lo, std::string* out) {
  if (lo > 0 && *v == '\0') return Status::Config(std::string(name) + " is set but empty");
  *out = v;  // "" = none / off
  return Status::Ok();
}

Status FromEnv(const char* name, const char* v, int64_t, uint64_t* out) {
  auto r = ParseSize(v);
  if (!r.ok()) return Status::Config(std::string(name) + ": " + r.status().message());
  *out = r.value();
  return Status::Ok();
}

Status FromEnv(const char* name, const char* v, int64_t lo, int* out) {
  int64_t x;
  if (!ParseInt(v, lo, INT_MAX, &x)) {
    return Status::Config(std::string(name) + "='" + v +
                          "' is not an integer >= " + std::to_string(lo));
  }
  *out = static_cast<int>(x);
  return Status::Ok();
}

Status FromEnv(const char* name, const char* v, int64_t, bool* out) {
  if (!ParseBool(v, out)) {
    return Status::Config(std::string(name) + "='" + v +
                          "' is not a boolean (use 1, 0, true, false, yes, no, on, off)");
  }
  return Status::Ok();
}

Status FromEnv(const char* name, const char* v, int64_t, uint32_t* out) {
  auto r = ParseMode(v);
  if (!r.ok()) return Status::Config(std::string(name) + ": " + r.status().message());
  *out = r.value();
  return Status::Ok();
}

// Every enumerated key (config_enums.def).
template <typename E>
requires std::is_enum_v<E> Status FromEnv(const char* name, const char* v, int64_t, E* out) {
  auto r = EnumKey<E>::Parse(v);
  if (!r.ok()) return Status::Config(std::string(name) + ": " + r.status().message());
  *out = r.value();
  return Status::Ok();
}

Status FromEnv(const char* name, const char* v, int64_t, double* out) {
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(v, &end);
  if (end == v || *end != '\0' || errno != 0) {
    return Status::Config(std::string(name) + "='" + v + "' is not a number");
  }
  *out = d;
  return Status::Ok();
}

}  // namespace

// Every key with a variable in config_keys.def, in the table's order.
Status ApplyEnvironment(Config* c) {
#define CAIRN_CONFIG_KEY(section, key, member, lo, env, py, type, dflt, doc) \
  if (const char* v = *(env) != '\0' ? std::getenv(env) : nullptr) {         \
    CAIRN_RETURN_IF_ERROR(FromEnv(env, v, lo, &c->member));                  \
  }
#include "cairn/config_keys.def"
#undef CAIRN_CONFIG_KEY
  return Status::Ok();
}

}  // namespace cairn::config_values
