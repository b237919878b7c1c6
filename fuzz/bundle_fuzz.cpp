// fuzz_bundle: any bytes as a bundle one rank sends another (docs/format.md
// 3.9, "The bundle"), parsed as it arrives in pieces: the first byte sets
// the piece size, the rest is the bundle. OK (an accepted bundle encodes
// back to the same bytes) or kCorrupt naming the sender; anything else, a
// crash or a sanitizer report is a finding.
#include <cstdlib>

#include "fuzz/inputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const cairn::Status s = cairn::fuzz::ParseBundleInput(data, size);
  if (!s.ok() && (s.code() != cairn::Code::kCorrupt || s.message().empty())) {
    std::abort();  // libFuzzer reports it with the input
  }
  return 0;
}
