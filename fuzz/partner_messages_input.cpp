// ParsePartnerMessagesInput (fuzz/inputs.hpp): the bytes as one of the
// messages a holder or a source receives after a partner copy's head.
#include <cstring>
#include <vector>

#include "fuzz/inputs.hpp"
#include "redundancy/partner/messages.hpp"

namespace cairn::fuzz {
namespace {

// What the parsers accept is exactly what a rank writes.
Status SameBytes(const int64_t* words, const uint8_t* data, size_t size) {
  return std::memcmp(words, data, size) == 0
             ? Status::Ok()
             : Status::Internal("an accepted message does not encode back to its bytes");
}

}  // namespace

Status ParsePartnerMessagesInput(const uint8_t* data, size_t size) {
  if (size == 0) return Status::Corrupt("no message kind");
  const uint8_t kind = data[0] % 3;
  const uint8_t* msg = data + 1;
  const size_t bytes = size - 1;
  if (kind == 0) {  // a chunk
    auto chunk = partner::ParseChunk(msg, bytes, "fuzz");
    if (!chunk.ok()) return chunk.status();
    if (!chunk->intact) return Status::Ok();  // damage the transfer reports
    std::vector<uint8_t> again(msg, msg + bytes);
    partner::PutTrailer(again.data(), chunk->payload, chunk->index);
    return std::memcmp(again.data(), msg, bytes) == 0
               ? Status::Ok()
               : Status::Internal("an intact chunk's trailer is not the one a source writes");
  }
  if (kind == 1) {  // the answer to version 7
    auto code = partner::ParseAnswer(msg, bytes, 7, "fuzz");
    if (!code.ok()) return code.status();
    const partner::Answer a = partner::EncodeAnswer(7, *code);
    return SameBytes(a.data(), msg, bytes);
  }
  auto code = partner::ParseAbort(msg, bytes, "fuzz");
  if (!code.ok()) return code.status();
  const partner::AbortNotice n = partner::EncodeAbort(*code);
  return SameBytes(n.data(), msg, bytes);
}

}  // namespace cairn::fuzz
