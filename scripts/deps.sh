#!/usr/bin/env bash
# Installs the Debian packages needed to build and test Cairn, only if some
# tool or header is missing. Idempotent; silent when nothing is missing.
# Uses sudo only when not root and sudo exists. Exit status != 0 on failure.
set -euo pipefail

missing=()
need_cmd() {  # need_cmd COMMAND PACKAGE
  command -v "$1" >/dev/null 2>&1 || missing+=("$2")
}
need_file() {  # need_file PACKAGE FILE...: ok if any FILE exists or PACKAGE is installed
  local pkg="$1" f
  shift
  for f in "$@"; do [[ -e "$f" ]] && return 0; done
  dpkg -s "$pkg" >/dev/null 2>&1 && return 0
  missing+=("$pkg")
}

need_cmd cmake cmake
need_cmd g++ g++
need_cmd cc gcc
need_cmd gfortran gfortran  # the Fortran binding (bindings/fortran) and its test
need_cmd pkg-config pkg-config
need_cmd clang++-14 clang-14  # the thread-safety tree (scripts/test.sh, build-tsa/)
need_cmd ccache ccache  # scripts/test.sh compiles its five trees through it when present
if ! command -v make >/dev/null 2>&1 && ! command -v ninja >/dev/null 2>&1; then
  missing+=(make)
fi
need_file libgtest-dev /usr/include/gtest/gtest.h
need_file libgmock-dev /usr/include/gmock/gmock.h
need_file libtomlplusplus-dev /usr/include/toml++/toml.h /usr/include/toml++/toml.hpp
need_file libhwloc-dev /usr/include/hwloc.h  # NUMA topology and HWLOC_XMLFILE tests (optional in CMake; installed so CI tests it)
need_file libisal-dev /usr/include/isa-l/erasure_code.h  # Reed-Solomon L3 sets, mpi.l3_code = rs (optional in CMake; installed so CI tests it)
need_file libxxhash-dev /usr/include/xxhash.h  # XXH3-128 for checkpoint.changes=hash (optional in CMake; installed so CI tests it)
# libFuzzer's runtime for clang-14 (scripts/fuzz.sh, build-fuzz/)
need_file libclang-rt-14-dev /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a
need_file zlib1g-dev /usr/include/zlib.h  # deflate for the PNGs of examples/rtm (cairn-rtm)
# MPI (libcairn_mpi and its mpirun tests; docs/mpi.md): Open MPI from Debian.
need_cmd mpirun openmpi-bin
need_file libopenmpi-dev /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h /usr/lib/aarch64-linux-gnu/openmpi/include/mpi.h
# Python package (tests/python/run.sh): venv + pip, and Python.h for the
# extension. Checked on the python3 in PATH (pyenv's, if any, has them all).
need_cmd python3 python3
if command -v python3 >/dev/null 2>&1; then
  python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
  python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
  python3 -c 'import os, sysconfig
raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
    >/dev/null 2>&1 || missing+=(python3-dev)
else
  missing+=(python3-venv python3-pip python3-dev)
fi
# matplotlib for tools/cairn-plot: scripts/main.sh's timeline pictures and the
# cairn_plot test. Debian's python3-matplotlib serves /usr/bin/python3, which
# the scripts fall back to when the python3 in PATH (pyenv's, say) lacks it.
if ! python3 -c 'import matplotlib' >/dev/null 2>&1 &&
   ! /usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1; then
  missing+=(python3-matplotlib)
fi

# CMake >= 3.25 (CMakeLists.txt and CMakePresets.json version 6).
if command -v cmake >/dev/null 2>&1; then
  ver="$(cmake --version | sed -n '1s/[^0-9]*\([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p')"
  if [[ -n "$ver" ]] && ! printf '3.25\n%s\n' "$ver" | sort -C -V; then
    echo "deps.sh: cmake $ver is too old; Cairn needs cmake >= 3.25" >&2
    exit 1
  fi
fi

[[ ${#missing[@]} -eq 0 ]] && exit 0

fail() {
  echo "deps.sh: cannot install missing packages: ${missing[*]}" >&2
  echo "deps.sh: $*" >&2
  exit 1
}
command -v apt-get >/dev/null 2>&1 || fail "apt-get not found; install them with your package manager"
sudo=()
if [[ "$(id -u)" -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || fail "not root and sudo not found; run as root"
  sudo=(sudo)
fi

echo "deps.sh: installing ${missing[*]}" >&2
log="$(mktemp "${TMPDIR:-/tmp}/cairn-deps.XXXXXX")"
export DEBIAN_FRONTEND=noninteractive
if ! { "${sudo[@]}" apt-get update -qq &&
       "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  rm -f "$log"
  fail "apt-get failed (output above)"
fi
rm -f "$log"
