// fuzz_config: any text as a configuration (fuzz/inputs.hpp). Errors in a
// configuration are kConfig (docs/config.md); any other code, a crash, an
// escaped exception, a leak or a sanitizer report is a finding.
#include <cstdlib>

#include "fuzz/inputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!cairn::fuzz::ConfigOutcome(cairn::fuzz::LoadConfigInput(data, size))) {
    std::abort();  // libFuzzer reports it with the input
  }
  return 0;
}
