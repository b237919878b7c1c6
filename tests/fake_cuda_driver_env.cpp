// Makes the fake CUDA driver (testing/fake_cuda) the process-wide driver of
// cairn_tests: CAIRN_CUDA_DRIVER names it before main() runs, so that the
// first gpu::Driver::Get() (in the library or in a test) loads it. An
// existing CAIRN_CUDA_DRIVER wins: the ctest client_host_without_driver
// sets it to a missing library to run the host tests without any driver.
#include <cstdlib>

#include "testing/test_paths.hpp"

namespace {

const bool kFakeDriverNamed = [] {
  setenv("CAIRN_CUDA_DRIVER", cairn::test::kFakeCudaLib, /*overwrite=*/0);
  return true;
}();

}  // namespace
