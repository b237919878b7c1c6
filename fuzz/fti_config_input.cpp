// ParseFtiConfigInput (fuzz/inputs.hpp): libcairn_fti's reader of FTI's
// configuration files, on any text.
#include <string>

#include "compat/fti/fti_config.hpp"
#include "fuzz/inputs.hpp"

namespace cairn::fuzz {

Status ParseFtiConfigInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  return fti::ParseConfig(text, "fuzz.fti").status();
}

}  // namespace cairn::fuzz
