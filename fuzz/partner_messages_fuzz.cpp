// fuzz_partner_messages: any bytes as a partner copy's message after its
// head (docs/format.md 3.8): the first byte chooses a chunk, the holder's
// answer or an abort notice, the rest is the message. OK (an accepted
// message encodes back to the same bytes) or kCorrupt naming what is wrong;
// anything else, a crash or a sanitizer report is a finding.
#include <cstdlib>

#include "fuzz/inputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const cairn::Status s = cairn::fuzz::ParsePartnerMessagesInput(data, size);
  if (!s.ok() && (s.code() != cairn::Code::kCorrupt || s.message().empty())) {
    std::abort();  // libFuzzer reports it with the input
  }
  return 0;
}
