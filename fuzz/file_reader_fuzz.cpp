// fuzz_file_reader: any bytes as a data file (fuzz/inputs.hpp). The library
// must only return errors: a crash, a leak, a sanitizer report or an
// allocation beyond -rss_limit_mb is a finding.
#include "fuzz/inputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)cairn::fuzz::ReadFileInput(data, size);
  return 0;
}
