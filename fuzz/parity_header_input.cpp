// ParseParityHeaderInput (fuzz/inputs.hpp): the bytes as a parity file (XOR or
// Reed-Solomon).
#include <algorithm>
#include <vector>

#include "fuzz/inputs.hpp"
#include "redundancy/parity/header.hpp"

namespace cairn::fuzz {

Status ParseParityHeaderInput(const uint8_t* data, size_t size) {
  auto h = parity::impl::ParseHeader(data, size, size, "fuzz");
  if (!h.ok()) return h.status();
  // What the parser accepts is exactly what an encoding writes.
  const std::vector<uint8_t> again = parity::impl::EncodeHeader(*h);
  if (again.size() > size || !std::equal(again.begin(), again.end(), data)) {
    return Status::Internal("an accepted header does not encode back to its bytes");
  }
  return Status::Ok();
}

}  // namespace cairn::fuzz
