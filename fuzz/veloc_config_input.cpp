// ParseVelocConfigInput (fuzz/inputs.hpp): libcairn_veloc's reader of
// VELOC's configuration files, on any text.
#include <string>

#include "compat/veloc/veloc_config.hpp"
#include "fuzz/inputs.hpp"

namespace cairn::fuzz {

Status ParseVelocConfigInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  return veloc::ParseVelocConfig(text, "fuzz.cfg").status();
}

}  // namespace cairn::fuzz
