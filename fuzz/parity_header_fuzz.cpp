// fuzz_parity_header: any bytes as an XOR parity file (docs/format.md 3.9),
// whose header a rebuild parses before it uses the parity. OK (and then it
// encodes back to the same bytes) or kCorrupt naming what is wrong;
// anything else, a crash or a sanitizer report is a finding.
#include <cstdlib>

#include "fuzz/inputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const cairn::Status s = cairn::fuzz::ParseParityHeaderInput(data, size);
  if (!s.ok() && (s.code() != cairn::Code::kCorrupt || s.message().empty())) {
    std::abort();  // libFuzzer reports it with the input
  }
  return 0;
}
