// LoadConfigInput (fuzz/inputs.hpp): TOML, then environment settings, loaded
// as LoadConfig loads a file: defaults, TOML, environment, Validate.
#include <cstdlib>
#include <string>
#include <string_view>

#include "cairn/config.hpp"
#include "fuzz/inputs.hpp"

namespace cairn::fuzz {
namespace {

// The variables LoadConfig reads, from the one table of keys.
constexpr const char* kEnvNames[] = {
#define CAIRN_CONFIG_KEY(section, key, member, lo, env, py, type, dflt, doc) env,
#include "cairn/config_keys.def"
#undef CAIRN_CONFIG_KEY
};

bool KnownVariable(std::string_view name) {
  for (const char* v : kEnvNames) {
    if (*v != '\0' && name == v) return true;
  }
  return false;
}

void ClearEnvironment() {
  for (const char* v : kEnvNames) {
    if (*v != '\0') ::unsetenv(v);
  }
}

// Sets NAME=VALUE for each line (ended by '\n' or NUL) that names a known variable.
void SetEnvironment(std::string_view text) {
  while (!text.empty()) {
    size_t end = text.find_first_of(std::string_view("\n\0", 2));
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end == text.size() ? end : end + 1);
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos || !KnownVariable(line.substr(0, eq))) continue;
    ::setenv(std::string(line.substr(0, eq)).c_str(), std::string(line.substr(eq + 1)).c_str(), 1);
  }
}

}  // namespace

Status LoadConfigInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const bool environment = nul != std::string_view::npos;
  ClearEnvironment();
  if (environment) SetEnvironment(input.substr(nul + 1));
  Result<Config> config = LoadConfigFromString(input.substr(0, nul), "fuzz.toml", environment);
  ClearEnvironment();
  // The value parsers on their own, on the whole text.
  if (auto bytes = ParseSize(input); bytes.ok()) (void)FormatSize(*bytes);
  (void)ParseCacheInit(input);
  (void)ParseDeviceCacheInit(input);
  return config.status();
}

}  // namespace cairn::fuzz
