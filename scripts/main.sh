#!/usr/bin/env bash
# Builds Cairn (Release, build/) and runs the main job: `cairn-bench uniform`
# with its defaults. Extra arguments are passed to cairn-bench.
# Build output goes to stderr; stdout is the benchmark's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/deps.sh
{
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
  # Only what the main job needs: the test suite is scripts/test.sh's job.
  cmake --build build -j"$(nproc)" --target cairn_bench cairn_cli
} >&2
exec build/bin/cairn-bench uniform "$@"
