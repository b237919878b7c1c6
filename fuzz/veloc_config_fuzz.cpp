// fuzz_veloc_config: any text as VELOC's configuration file (fuzz/inputs.hpp):
// a configuration error is kConfig naming the line; any other code, a crash,
// an escaped exception, a leak or a sanitizer report is a finding.
#include <cstdlib>

#include "fuzz/inputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!cairn::fuzz::ConfigOutcome(cairn::fuzz::ParseVelocConfigInput(data, size))) {
    std::abort();  // libFuzzer reports it with the input
  }
  return 0;
}
