#!/usr/bin/env bash
# Builds the Python package into a virtual environment and runs its pytest
# suite (tests/python). Called by scripts/test.sh; runs standalone too:
#
#   tests/python/run.sh [VENV_DIR [JUNIT_XML]]     # VENV_DIR: build-py/venv
#
# The venv is created if missing and kept: numpy, pytest, mypy and the build
# requirements (scikit-build-core, nanobind) are installed into it, then the
# package with `pip install --no-build-isolation` and a build directory next
# to the venv (<VENV_DIR>/../build), so a rerun rebuilds only what changed.
#
# Environment:
#   CAIRN_TEST_JOBS=N           build parallelism (default 2)
#   CAIRN_TEST_PY_ISOLATED=1    fresh venv and a plain `pip install .` (build
#                               isolation, as a user would run it); slower
#   PYTHON=python3.12           the interpreter to make the venv with
#   CAIRN_TEST_CUDA=ON          CAIRN_WITH_CUDA for the package's build (default
#                               AUTO; scripts/test.sh sets ON: no cuda.h fails)
#   CAIRN_TEST_TORCH=VERSION    the torch from PyPI for the torch tests (default
#                               the pinned 2.15.0; "off": none, and they skip,
#                               which scripts/test.sh does not allow)
#   CAIRN_TORCH_CACHE=DIR       where it is installed once per machine (default
#                               ~/.cache/cairn/torch-site)
#   CAIRN_FAKE_CUDA_LIB=PATH    the fake CUDA driver for the GPU buffer tests
#                               (default: build/lib/libcairn_fake_cuda.so, built by
#                               the CMake tree when cuda.h is found); exported as
#                               CAIRN_CUDA_DRIVER unless that is set already (a
#                               real driver). Neither: test_gpu.py is skipped
#                               (which scripts/test.sh does not allow).
# Exit status: pytest's (non-zero if the install failed).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root="$PWD"

venv="$(realpath -m "${1:-build-py/venv}")"
junit="${2:-}"
build="$(dirname "$venv")/build"
python="${PYTHON:-python3}"
cuda="${CAIRN_TEST_CUDA:-AUTO}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CAIRN_TEST_JOBS:-2}"
export PIP_DISABLE_PIP_VERSION_CHECK=1

start=$SECONDS
if [[ "${CAIRN_TEST_PY_ISOLATED:-0}" == 1 ]]; then
  rm -rf "$venv" "$build"
fi
if [[ ! -x "$venv/bin/python" ]]; then
  echo "run.sh: creating $venv"
  "$python" -m venv "$venv"
fi
py="$venv/bin/python"

# mypy is capped at a version known to pass, so that a new release's checks
# cannot fail CI by themselves.
"$py" -m pip install -q numpy pytest "mypy>=1.10,<2.5"
if [[ "${CAIRN_TEST_PY_ISOLATED:-0}" == 1 ]]; then
  "$py" -m pip install -q -C "cmake.define.CAIRN_WITH_CUDA=$cuda" "$root"
else
  "$py" -m pip install -q "scikit-build-core>=0.10" "nanobind>=2.2"
  "$py" -m pip install -q --no-build-isolation -C "build-dir=$build" \
    -C "cmake.define.CAIRN_WITH_CUDA=$cuda" "$root"
fi
echo "run.sh: cairn installed into $venv in $((SECONDS - start))s"

# torch (tests/python/test_torch_dcp.py, test_state.py's torch tests): PyPI's
# Linux torch with its CUDA wheels is ~5 GB, so it is installed once per
# machine into a directory of its own (pip --target, per Python version and
# torch version) and the venv gets it through a .pth file: a fresh clone's run
# adds one line instead of downloading and unpacking it again.
torch_version="${CAIRN_TEST_TORCH:-2.15.0}"
if [[ "$torch_version" != off ]]; then
  tag="$("$py" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
  torch_site="${CAIRN_TORCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cairn/torch-site}/$tag-torch$torch_version"
  if [[ ! -d "$torch_site" ]]; then
    echo "run.sh: installing torch $torch_version into $torch_site (once per machine)"
    rm -rf "$torch_site.partial"
    "$py" -m pip install -q --no-warn-script-location --target "$torch_site.partial" "torch==$torch_version"
    mv "$torch_site.partial" "$torch_site"
  fi
  purelib="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$torch_site" > "$purelib/cairn-torch-site.pth"
fi

# The GPU buffer tests (tests/python/test_gpu.py) need a CUDA driver loaded by
# the core (it reads CAIRN_CUDA_DRIVER once per process): the fake one of the
# CMake build tree, when there is one.
if [[ -z "${CAIRN_CUDA_DRIVER:-}" ]]; then
  fake="${CAIRN_FAKE_CUDA_LIB:-$root/build/lib/libcairn_fake_cuda.so}"
  if [[ -f "$fake" ]]; then
    export CAIRN_CUDA_DRIVER="$(realpath "$fake")"
    echo "run.sh: GPU buffer tests use the fake CUDA driver $CAIRN_CUDA_DRIVER"
  else
    echo "run.sh: no fake CUDA driver at $fake (build the CMake tree with cuda.h): GPU buffer tests are skipped"
  fi
fi

# cairn.Client(comm=...) (tests/python/test_mpi.py): mpi4py, which pip builds
# against the MPI that mpicc names (Debian's Open MPI, scripts/deps.sh), and
# the CMake tree's libcairn_mpi, loaded by the extension at run time.
if command -v mpicc >/dev/null; then
  "$py" -m pip install -q mpi4py || echo "run.sh: mpi4py did not install: the MPI test is skipped"
fi
if [[ -z "${CAIRN_MPI_LIBRARY:-}" && -f "$root/build/lib/libcairn_mpi.so" ]]; then
  export CAIRN_MPI_LIBRARY="$(realpath "$root/build/lib/libcairn_mpi.so")"
  echo "run.sh: cairn.Client(comm=...) uses $CAIRN_MPI_LIBRARY"
fi

args=(-q -rs -p no:cacheprovider "$root/tests/python")
[[ -n "$junit" ]] && args+=("--junitxml=$junit")
# mypy's cache goes next to the venv, not into the source tree.
export MYPY_CACHE_DIR="$(dirname "$venv")/mypy-cache"
cd "$root"
"$py" -m pytest "${args[@]}"
