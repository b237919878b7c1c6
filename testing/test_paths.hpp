// Where the build put things, for the tests that run the built programs or
// read the source tree's data. tests/CMakeLists.txt generates the definitions
// (test_paths.cpp in the build tree, one object): compiled into every test
// file as macros, the paths made every object depend on where the tree is,
// and ccache could not share them between two checkouts (scripts/test.sh).
#pragma once

namespace cairn::test {

extern const char kBinDir[];     // the build's bin/ (cairn, cairn-bench)
extern const char kSourceDir[];  // the source tree's root
// The fake CUDA driver (testing/fake_cuda); defined in builds that have it
// (CAIRN_HAVE_FAKE_CUDA), empty in the others.
extern const char kFakeCudaLib[];

}  // namespace cairn::test
