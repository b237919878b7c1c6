// fuzz_manifest: any bytes as a global manifest (docs/format.md 3.6; what a
// restart reads from every rank's directory and a saved job's). OK or
// kCorrupt naming what is wrong; any other code, a crash, an escaped
// exception or a sanitizer report is a finding.
#include <cstdlib>

#include "fuzz/inputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const cairn::Status s = cairn::fuzz::ParseManifestInput(data, size);
  if (!s.ok() && (s.code() != cairn::Code::kCorrupt || s.message().empty())) {
    std::abort();  // libFuzzer reports it with the input
  }
  return 0;
}
