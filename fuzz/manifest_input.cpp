// ParseManifestInput (fuzz/inputs.hpp): the bytes as a global manifest.
#include <string_view>

#include "fuzz/inputs.hpp"
#include "redundancy/manifest.hpp"

namespace cairn::fuzz {

Status ParseManifestInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  return collective::ParseManifest(bytes, "fuzz/global").status();
}

}  // namespace cairn::fuzz
