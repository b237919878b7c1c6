#!/usr/bin/env bash
# Install test (run by .ci/run through scripts/test.sh, not by ctest):
#   1. cmake --install the Release build (default: build/) into a temp prefix
#      (not a system directory); every installed shared library carries a
#      RUNPATH that finds its own Cairn dependencies ($ORIGIN);
#   2. each consumer below is built three ways, each then run with no
#      environment set (LD_LIBRARY_PATH unset):
#        plain:      CC x.c -I<prefix>/include -L<prefix>/lib -l<lib> -Wl,-rpath,<prefix>/lib
#        pkg-config: CC x.c $(pkg-config --cflags --libs <pc>) -Wl,-rpath,<its libdir>
#        CMake:      find_package(Cairn) and the imported target (tests/install/)
#      the consumers: C over libcairn (examples/consumer/main.c), C++
#      (tests/install/consumer.cpp), Fortran against the installed cairn.mod
#      (tests/install/consumer.f90); with libcairn_mpi, under mpirun on 2
#      ranks: C over it (examples/consumer_mpi/main.c), VELOC's heat program
#      (tests/compat/veloc_heatdis.c) against the installed veloc.h and
#      libcairn_veloc, FTI's (tests/compat/fti_heat.c) against fti.h and
#      libcairn_fti;
#   3. the C consumer linked statically (pkg-config --static).
# Usage: tests/install_test.sh [BUILD_DIR]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
[[ "$build" = /* ]] || build="$root/$build"
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  echo "install_test: $build is not a configured build directory" >&2
  exit 1
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/cairn-install-test.XXXXXX")"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
step() { echo "install_test: $*"; }

step "installing $build into $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || {
  cat "$work/install.log" >&2
  echo "install_test: cmake --install failed" >&2
  exit 1
}
for f in include/cairn/cairn.h include/cairn/cairn.hpp bin/cairn; do
  [[ -e "$prefix/$f" ]] || { echo "install_test: $f missing from the install" >&2; exit 1; }
done
libdir="$(dirname "$(find "$prefix" -name 'libcairn.so' -print -quit)")"
pcdir="$(dirname "$(find "$prefix" -name 'cairn.pc' -print -quit)")"
[[ -f "$libdir/libcairn.so" && -f "$libdir/libcairn.a" ]] || {
  echo "install_test: libcairn.so/libcairn.a missing from the install" >&2
  exit 1
}
[[ -f "$pcdir/cairn.pc" ]] || { echo "install_test: cairn.pc missing" >&2; exit 1; }

# The consumers run with a private scratch directory and a small cache.
export TMPDIR="$work" CAIRN_HOST_CACHE=16MiB
export PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
cc="${CC:-cc}"
cxx="${CXX:-c++}"
fc="${FC:-gfortran}"
mpirun_flags=(-np 2 --oversubscribe --timeout 60 --mca btl self,vader)
[[ "$(id -u)" -eq 0 ]] && mpirun_flags=(--allow-run-as-root "${mpirun_flags[@]}")
export OMPI_MCA_btl_vader_single_copy_mechanism=none

step "every installed shared library finds its Cairn dependencies (RUNPATH \$ORIGIN)"
for lib in "$libdir"/libcairn*.so; do
  readelf -d "$lib" | grep -q 'RUNPATH.*\$ORIGIN' || {
    echo "install_test: $(basename "$lib") has no RUNPATH with \$ORIGIN" >&2
    readelf -d "$lib" >&2
    exit 1
  }
done

# run_bare PROGRAM ARGS...: runs with no library path set, under mpirun when
# $mpi is 1. Each run starts without checkpoints: its own CAIRN_SCRATCH, and
# $work/ckpt (where the VELOC and FTI configurations point) emptied.
run_bare() {
  local -a cmd=("$@")
  rm -rf "$work/ckpt"
  [[ "$mpi" == 1 ]] && cmd=(mpirun -x CAIRN_SCRATCH -x CAIRN_HOST_CACHE "${mpirun_flags[@]}" "$@")
  CAIRN_SCRATCH="$(mktemp -d "$work/run.XXXXXX")" env -u LD_LIBRARY_PATH "${cmd[@]}"
}

# consume NAME COMPILER SOURCE LIBS PC TARGET LANG COMPONENTS -- ARGS...:
# builds SOURCE the three ways (header) and runs each build with ARGS. LIBS:
# the plain line's libraries, those whose functions SOURCE calls.
consume() {
  local name="$1" compiler="$2" src="$3" lib="$4" pc="$5" target="$6" lang="$7" comps="$8" bin
  shift 9
  local -a extra=()
  [[ "$lang" == Fortran ]] && extra=(-I"$prefix/include/cairn/fortran" -lcairn_fortran)
  local -a libs
  read -ra libs <<<"$lib"
  step "$name: plain compiler line (${libs[*]/#/-l} -Wl,-rpath)"
  bin="$work/$name-plain"
  "$compiler" -o "$bin" "$src" -I"$prefix/include" -L"$libdir" "${extra[@]}" "${libs[@]/#/-l}" -Wl,-rpath,"$libdir"
  run_bare "$bin" "$@"
  step "$name: pkg-config $pc"
  bin="$work/$name-pc"
  # shellcheck disable=SC2046  # word splitting of pkg-config's output is intended
  "$compiler" -o "$bin" "$src" $(pkg-config --cflags --libs "$pc") -Wl,-rpath,"$(pkg-config --variable=libdir "$pc")"
  run_bare "$bin" "$@"
  step "$name: find_package(Cairn${comps:+ COMPONENTS $comps}), $target"
  if ! { cmake -S "$root/tests/install" -B "$work/$name-cmake" -DCMAKE_BUILD_TYPE=Release \
            -DCMAKE_PREFIX_PATH="$prefix" -DCONSUMER_SOURCE="$src" -DCONSUMER_TARGET="$target" \
            -DCONSUMER_LANG="$lang" -DCONSUMER_COMPONENTS="$comps" -DCMAKE_C_COMPILER="${cc_cmake:-$cc}" &&
         cmake --build "$work/$name-cmake"; } >"$work/$name-cmake.log" 2>&1; then
    cat "$work/$name-cmake.log" >&2
    echo "install_test: building $name against the install with CMake failed" >&2
    exit 1
  fi
  run_bare "$work/$name-cmake/consumer" "$@"
}

mpi=0
consume c "$cc" "$root/examples/consumer/main.c" cairn cairn cairn::cairn C "" --
consume cpp "$cxx" "$root/tests/install/consumer.cpp" cairn cairn cairn::cairn CXX "" --
if [[ -f "$prefix/include/cairn/fortran/cairn.mod" ]]; then
  consume fortran "$fc" "$root/tests/install/consumer.f90" cairn cairn_fortran cairn::cairn_fortran Fortran "" --
fi

step "pkg-config: examples/consumer_pkgconfig (static)"
# shellcheck disable=SC2046
"$cc" -std=c99 -Wall -Wextra -o "$work/consumer_pc_static" \
  "$root/examples/consumer/main.c" $(pkg-config --cflags cairn) \
  "$libdir/libcairn.a" $(pkg-config --static --libs-only-other --libs-only-l cairn | sed 's/-lcairn\b//')
if ldd "$work/consumer_pc_static" | grep -q libcairn; then
  echo "install_test: static consumer still depends on libcairn.so" >&2
  exit 1
fi
"$work/consumer_pc_static"

if [[ -f "$libdir/libcairn_mpi.so" ]]; then
  for f in include/cairn/cairn_mpi.h include/veloc.h include/veloc/defs.h include/fti.h; do
    [[ -f "$prefix/$f" ]] || { echo "install_test: $f missing from the install" >&2; exit 1; }
  done
  mpi=1
  cc_cmake="$(command -v mpicc)"
  consume mpi mpicc "$root/examples/consumer_mpi/main.c" "cairn_mpi cairn" cairn_mpi Cairn::cairn_mpi C mpi --
  # VELOC's and FTI's programs, unchanged: -I<prefix>/include -lcairn_veloc / -lcairn_fti.
  printf 'scratch = %s\npersistent = %s\n' "$work/ckpt/veloc-s" "$work/ckpt/veloc-p" > "$work/veloc.cfg"
  consume veloc mpicc "$root/tests/compat/veloc_heatdis.c" cairn_veloc cairn_veloc Cairn::veloc C mpi -- \
    "$work/veloc.cfg" mem 20 10 "$work/veloc.out"
  printf '[basic]\nnode_size = 2\nckpt_dir = %s\nglbl_dir = %s\nverbosity = 3\n' \
    "$work/ckpt/fti-local" "$work/ckpt/fti-global" > "$work/fti.cfg"
  consume fti mpicc "$root/tests/compat/fti_heat.c" cairn_fti cairn_fti Cairn::fti C mpi -- \
    "$work/fti.cfg" 20 "$work/fti.out"
  [[ -s "$work/fti.out" ]] || { echo "install_test: fti_heat wrote no result" >&2; exit 1; }
fi

step "OK"
