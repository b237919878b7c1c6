// ParsePartnerHeadInput (fuzz/inputs.hpp): the bytes as a partner copy's head.
#include <algorithm>
#include <cstdlib>
#include <vector>

#include "fuzz/inputs.hpp"
#include "redundancy/partner/head.hpp"

namespace cairn::fuzz {

Status ParsePartnerHeadInput(const uint8_t* data, size_t size) {
  auto head = partner::ParseHead(data, size, "fuzz");
  if (!head.ok()) return head.status();
  // What the parser accepts is exactly what a source writes.
  const std::vector<uint8_t> again = partner::EncodeHead(*head);
  if (again.size() != size || !std::equal(again.begin(), again.end(), data)) {
    return Status::Internal("an accepted head does not encode back to its bytes");
  }
  return Status::Ok();
}

}  // namespace cairn::fuzz
