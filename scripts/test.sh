#!/usr/bin/env bash
# Builds Cairn and runs the whole test suite:
#   1. Release build in build/      + ctest
#      then the Python package: tests/python/run.sh (venv in build-py/,
#      pip install ., pytest; counted from its JUnit XML)
#   2. ASan/UBSan build in build-asan + ctest   (skipped if CAIRN_TEST_QUICK=1)
#   3. TSan build in build-tsan       + ctest   (skipped if CAIRN_TEST_QUICK=1)
#   1c. thread-safety and clang build: clang++-14 tree in build-tsa/ with
#      -Wthread-safety -Werror=thread-safety (CAIRN_THREAD_SAFETY); builds
#      every target, runs nothing; a violation of a CAIRN_GUARDED_BY /
#      CAIRN_REQUIRES / CAIRN_EXCLUDES, or anything clang rejects, fails it
#   1d. fuzz: the libFuzzer targets (scripts/fuzz.sh, build-fuzz/), each run
#      for CAIRN_FUZZ_SECONDS (default 30), from a corpus kept per machine;
#      a finding fails it
#   4. tests/install_test.sh (install into a temp prefix, find_package and
#      pkg-config consumers)
#   5. skips: every skipped test (ctest and pytest JUnit XML) is listed; one
#      not on .ci/allowed-skips fails the run (scripts/skips.py)
# Stops at the first failure (non-zero exit). The last line is always
# "N passed, N failed" (after a "N skipped" line), summed over the ctest runs and pytest (+1
# for the install test).
#
# Every tree is configured with CAIRN_WITH_CUDA=ON: configuring fails without
# cuda.h instead of compiling the GPU tests away.
# Likewise CAIRN_WITH_MPI=ON: without MPI the configure fails instead of
# leaving libcairn_mpi and its mpirun tests (ctest label mpi) out.
#
# Environment (.ci/run clears all of these):
#   CAIRN_TEST_QUICK=1      skip the sanitizer builds (local iteration; CI runs them)
#   CAIRN_TEST_CCACHE=0     compile without ccache (default: through it when installed)
#   CAIRN_TEST_CUDA=AUTO    CAIRN_WITH_CUDA for the trees (default ON; local use only)
#   CAIRN_TEST_MPI=AUTO     CAIRN_WITH_MPI for the trees (default ON; local use only)
#   CAIRN_TEST_JOBS=N       build/test parallelism (default 2)
#   CAIRN_TEST_EXCLUDE=RE   extra ctest -E regex for every run (local use only)
#   CAIRN_TEST_PYTHON=0     skip the Python package's tests (local use only)
#   CAIRN_FUZZ_SECONDS=N    seconds per fuzz target (default 30; local use only)
#
# Sanitizer exclusions: a test that cannot run under a sanitizer carries the
# ctest label no-asan or no-tsan (set_tests_properties(... LABELS no-tsan))
# and the reason in a comment next to it (grep the CMakeLists for them: the
# Python figure smokes, the 4-rank MPI heat programs, most 1-rank and some
# 2-rank drop-in API cases: tests/compat/CMakeLists.txt says which and why;
# the GoogleTest sweeps and repeats TSan skips: _cairn_gtest_no_tsan in
# tests/CMakeLists.txt). The Release tree runs every test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD"

jobs="${CAIRN_TEST_JOBS:-2}"
passed=0
failed=0
skipped=0
junits=()  # SUITE=JUNIT_XML for scripts/skips.py
export CAIRN_TEST_CUDA="${CAIRN_TEST_CUDA:-ON}"  # tests/python/run.sh's pip build too
export CAIRN_TEST_MPI="${CAIRN_TEST_MPI:-ON}"
logdir="$(mktemp -d "${TMPDIR:-/tmp}/cairn-test.XXXXXX")"

summary() {
  local rc=$?
  rm -rf "$logdir"
  if [[ $rc -ne 0 && $failed -eq 0 ]]; then
    echo "test.sh: a build or setup step failed (exit $rc)" >&2
    failed=1  # counted as one failure: no test result to report
  fi
  # The closing line keeps the "N passed, N failed" form that CI reads;
  # skips (each allowed, or counted as a failure above) go on the line before.
  echo "$skipped skipped"
  echo "$passed passed, $failed failed"
  exit "$rc"
}
trap summary EXIT

# Each banner carries the seconds since the start: CI logs show where the
# 15-minute budget goes.
banner() { printf '\n=== %s === (t=%ds)\n' "$*" "$((SECONDS - ${start:-0}))"; }

# run_ctest NAME BUILD_DIR [ctest args...]: runs ctest, adds its counts.
# Skipped tests (GTEST_SKIP, exit 77) are counted apart, from its JUnit XML.
run_ctest() {
  local name="$1" dir="$2" log="$logdir/$1.log" xml="$logdir/$1.xml" rc=0 line total nfail nskip
  shift 2
  local -a args=(--test-dir "$dir" --output-on-failure -j"$jobs" --timeout 600
                 --output-junit "$xml" "$@")
  [[ -n "${CAIRN_TEST_EXCLUDE:-}" ]] && args+=(-E "$CAIRN_TEST_EXCLUDE")
  banner "ctest ($name)"
  "${wrap[@]}" ctest "${args[@]}" 2>&1 | tee "$log" || rc=$?
  line="$(grep -E '[0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1 || true)"
  if [[ -z "$line" ]]; then
    echo "test.sh: ctest ($name) ran no tests or did not finish (exit $rc)" >&2
    failed=$((failed + 1))
    return 1
  fi
  nfail="$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")"
  total="$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/' <<<"$line")"
  nskip="$(grep -c '<skipped' "$xml" 2>/dev/null || true)"
  nskip="${nskip:-0}"
  junits+=("$name=$xml")
  passed=$((passed + total - nfail - nskip))
  failed=$((failed + nfail))
  skipped=$((skipped + nskip))
  if [[ $rc -ne 0 || $nfail -ne 0 ]]; then
    echo "test.sh: ctest ($name): $nfail of $total tests failed" >&2
    return 1
  fi
}

# Sanitizer trees: RelWithDebInfo at -O1 with line tables only (-g1). This
# halves their compile time against -O2 -g (ASan+UBSan at -O2 -g alone would
# take most of the 15-minute budget on 2 cores) and keeps symbolized reports.
# In every tree the test files themselves build at -O0 (tests/CMakeLists.txt):
# ~2.5x faster to compile, the library keeps the tree's level.
# The examples (cairn-rtm and its two ~1-minute-under-TSan image checks) are
# built and tested in the Release tree only: they add nothing the library's
# own sanitized tests do not cover, and cost ~2 minutes of the CI budget.
san_flags=(-DCAIRN_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
           "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
           "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG")

# build NAME DIR [cmake -D args...]: configures and builds one tree.
build() {
  local name="$1" dir="$2"
  shift 2
  banner "build ($name) in $dir"
  "${wrap[@]}" cmake -S . -B "$dir" -DCAIRN_BUILD_TESTS=ON -DCAIRN_BUILD_BENCH=ON \
    -DCAIRN_WITH_CUDA="$CAIRN_TEST_CUDA" -DCAIRN_WITH_MPI="$CAIRN_TEST_MPI" "$@"
  "${wrap[@]}" cmake --build "$dir" -j"$jobs"
}

start=$SECONDS
scripts/deps.sh
wrap=()
# ccache (installed by deps.sh; CAIRN_TEST_CCACHE=0 turns it off): five trees
# (Release, Python, thread-safety, ASan, TSan) recompile mostly unchanged
# sources at every run; through the cache a rerun compiles only what changed.
# CMake (3.17+) and scikit-build-core take the launchers from the
# environment; CCACHE_BASEDIR makes paths relative, so a fresh clone in
# another directory hits the entries of the previous one.
# The test files compile with a precompiled header (tests/CMakeLists.txt):
# ccache takes them only with sloppiness pch_defines,time_macros (no test
# uses __DATE__ or __TIME__, and the header is included first, by -include),
# and, since the .gch differs at every build, only from the digest of its
# headers beside it (CCACHE_PCH_EXTSUM, tests/pch_sum.cmake). Without these
# every test file (over half of each tree's build) compiled at every run.
if [[ "${CAIRN_TEST_CCACHE:-1}" != 0 ]] && command -v ccache >/dev/null 2>&1; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  export CCACHE_SLOPPINESS=pch_defines,time_macros CCACHE_PCH_EXTSUM=1
fi

# 1. Release ------------------------------------------------------------------
build release build -DCMAKE_BUILD_TYPE=Release -DCAIRN_SANITIZE=
run_ctest release build

# 1b. Python package: pip install . into build-py/venv, then pytest ------------
# tests/python/run.sh does both; its JUnit XML gives the counts. About 2.5 min
# on 2 cores from scratch (the pip build compiles the core again), seconds on
# a rerun. CAIRN_TEST_PYTHON=0 skips it (local use only).
if [[ "${CAIRN_TEST_PYTHON:-1}" != 0 ]]; then
  banner "python (pip install . + pytest, tests/python/run.sh)"
  py_rc=0
  tests/python/run.sh build-py/venv "$logdir/pytest.xml" || py_rc=$?
  py_counts=""
  if [[ -f "$logdir/pytest.xml" ]]; then
    py_counts="$(python3 -c 'import sys, xml.etree.ElementTree as E
r = E.parse(sys.argv[1]).getroot()
t = [sum(int(s.get(k, 0)) for s in r.iter("testsuite")) for k in ("tests", "failures", "errors", "skipped")]
print(t[0] - t[1] - t[2] - t[3], t[1] + t[2], t[3])' "$logdir/pytest.xml")"
    junits+=("python=$logdir/pytest.xml")
  fi
  if [[ -z "$py_counts" ]]; then
    echo "test.sh: the Python package did not install or pytest did not finish (exit $py_rc)" >&2
    failed=$((failed + 1))
    exit 1
  fi
  read -r py_passed py_failed py_skipped <<<"$py_counts"
  passed=$((passed + py_passed))
  failed=$((failed + py_failed))
  skipped=$((skipped + py_skipped))
  if [[ $py_rc -ne 0 || $py_failed -ne 0 ]]; then
    echo "test.sh: pytest: $py_failed tests failed (exit $py_rc)" >&2
    exit 1
  fi
fi

# 1c. Thread-safety analysis: compile only --------------------------------------
# Checked locking (docs/design.md, "Locking"): GCC ignores the annotations, so
# one clang tree compiles everything with the analysis as errors. It is also
# the tree's clang build: every target (library, MPI and drop-in libraries,
# tools, tests, bench, examples, Fortran, and the Python extension with the
# nanobind of step 1b's venv), so a rule or a construct that only GCC accepts
# fails here. -O0 and no debug info. Then the unit tests run once
# in it: a build without NDEBUG, where Mutex::AssertHeld checks at run time
# that the calling thread holds the mutex (util/mutex.hpp). Counted as one
# test.
banner "thread-safety and clang build in build-tsa"
tsa_python=()
if [[ -x build-py/venv/bin/python ]]; then
  tsa_python=(-DCAIRN_BUILD_PYTHON=ON "-DPython_EXECUTABLE=$PWD/build-py/venv/bin/python")
fi
cmake -S . -B build-tsa -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14 \
  -DCAIRN_THREAD_SAFETY=ON -DCAIRN_BUILD_TESTS=ON -DCAIRN_BUILD_BENCH=ON -DCAIRN_BUILD_EXAMPLES=ON \
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DCMAKE_C_FLAGS_DEBUG=-O0 "${tsa_python[@]}"
if ! cmake --build build-tsa -j"$jobs"; then
  echo "test.sh: thread-safety (clang): the analysis found a violation (or clang failed)" >&2
  failed=$((failed + 1))
  exit 1
fi
if build-tsa/bin/cairn_tests --gtest_brief=1; then
  passed=$((passed + 1))
else
  echo "test.sh: the unit tests failed in the clang debug tree (build-tsa), AssertHeld checked" >&2
  failed=$((failed + 1))
  exit 1
fi

# 1d. Fuzzing: libFuzzer targets, bounded -------------------------------------
# scripts/fuzz.sh builds build-fuzz/ (clang++-14, ASan + UBSan, only the
# reader's and the config parser's sources) and runs each bin/fuzz_* for
# CAIRN_FUZZ_SECONDS (or at most 2000000 inputs) from its seed corpus and the
# committed findings; a crash, leak, sanitizer report, timeout or out-of-memory
# fails it. About 75 s of build from scratch and 60 s of fuzzing (four
# targets, two side by side, one core each, 30 s each), from the corpus that
# earlier runs on this machine kept (scripts/fuzz.sh): successive CI runs add
# up, where each used to start from the seeds. Counted as one test.
# docs/design.md, "Fuzzing", says how to run it longer.
banner "fuzz (libFuzzer, scripts/fuzz.sh) in build-fuzz"
if scripts/fuzz.sh "${CAIRN_FUZZ_SECONDS:-30}" 5000000; then
  passed=$((passed + 1))
else
  echo "test.sh: fuzz: a fuzz target found a crash (the input is named above)" >&2
  failed=$((failed + 1))
  exit 1
fi

if [[ "${CAIRN_TEST_QUICK:-0}" != 1 ]]; then
  # 2. ASan + UBSan -----------------------------------------------------------
  # intercept_tls_get_addr=0: GCC 12's LeakSanitizer can crash at exit
  # ("Tracer caught signal 11" right after "DTLS N at 0xca4-...") when it
  # walks glibc 2.36's dynamic-TLS vector, here after the fake CUDA driver's
  # thread_local state was used; a sanitizer-runtime bug, not a leak. With it
  # LSan skips dynamic TLS blocks (only the dlopen()ed fake has any).
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  build asan build-asan "${san_flags[@]}" -DCAIRN_SANITIZE=address,undefined
  run_ctest asan build-asan -LE no-asan
  unset ASAN_OPTIONS UBSAN_OPTIONS

  # 3. TSan -------------------------------------------------------------------
  # intercept_tls_get_addr=0: the same runtime bug as LSan's above, in TSan:
  # when a new thread first touches the dlopen()ed fake CUDA driver's
  # thread_local state, GCC 12's __tls_get_addr interceptor can misread
  # glibc 2.36's dynamic-TLS block and reset the shadow of a garbage range
  # ("ThreadSanitizer failed to allocate 0x1555556f15000 bytes at address
  # 10000005b000 (errno: 12)"), depending only on the binary's layout.
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 intercept_tls_get_addr=0"
  # GCC 12's TSan fails on kernels with high mmap randomization ("unexpected
  # memory mapping"); running without ASLR avoids that. The build is wrapped
  # too because gtest_discover_tests runs the test binary at build time.
  if command -v setarch >/dev/null 2>&1 && setarch "$(uname -m)" -R true 2>/dev/null; then
    wrap=(setarch "$(uname -m)" -R)
  fi
  build tsan build-tsan "${san_flags[@]}" -DCAIRN_SANITIZE=thread
  run_ctest tsan build-tsan -LE no-tsan
  unset TSAN_OPTIONS
  wrap=()
else
  banner "CAIRN_TEST_QUICK=1: sanitizer builds skipped"
fi

# 4. Install test --------------------------------------------------------------
banner "install test"
if "$root/tests/install_test.sh" build; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  exit 1
fi

# 5. Skips ----------------------------------------------------------------------
# A test that skips in CI tests nothing: each skip must be on the allow-list,
# with the reason it may skip on a machine of this kind.
banner "skips (allowed: .ci/allowed-skips)"
skips_out="$(python3 scripts/skips.py .ci/allowed-skips "${junits[@]}")" || skips_rc=$?
echo "$skips_out"
if [[ ${skips_rc:-0} -ne 0 ]]; then
  not_allowed="$(sed -nE 's/^[0-9]+ skipped, ([0-9]+) not allowed.*/\1/p' <<<"$skips_out")"
  echo "test.sh: ${not_allowed:-some} skipped tests are not on .ci/allowed-skips" >&2
  failed=$((failed + ${not_allowed:-1}))
  exit 1
fi

echo
echo "test.sh: all suites passed in $((SECONDS - start))s"
