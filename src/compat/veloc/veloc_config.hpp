// VELOC's configuration file (key = value lines) read into a cairn::Config
// (docs/veloc.md, "Configuration").
#ifndef CAIRN_COMPAT_VELOC_CONFIG_HPP_
#define CAIRN_COMPAT_VELOC_CONFIG_HPP_

#include <string>
#include <vector>

#include "cairn/config.hpp"
#include "cairn/status.hpp"

namespace cairn::veloc {

struct VelocConfig {
  Config cairn;             // scratch/persistent are the roots; the ranks' subdirectories are Cairn's
  bool sync = false;        // mode = sync
  std::vector<std::string> notes;  // ignored keys and other remarks, for stderr
};

// Reads `path`, then the VELOC_<KEY> environment variables on top (e.g.
// VELOC_SCRATCH), into a Config: cairn_config's TOML file (or Cairn's
// defaults) with CAIRN_* on top, then VELOC's keys. kConfig naming the file,
// line and key for unknown keys, bad values and missing required keys.
Result<VelocConfig> LoadVelocConfig(const char* path);

// The same from text (tests); `origin` names it in errors.
Result<VelocConfig> ParseVelocConfig(const std::string& text, const std::string& origin);

}  // namespace cairn::veloc

#endif  // CAIRN_COMPAT_VELOC_CONFIG_HPP_
