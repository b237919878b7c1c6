#!/usr/bin/env bash
# Install test (run by .ci/run through scripts/test.sh, not by ctest):
#   1. cmake --install the Release build (default: build/) into a temp prefix;
#   2. build and run examples/consumer with find_package(Cairn);
#   3. build and run the same program (examples/consumer/main.c) with pkg-config
#      as examples/consumer_pkgconfig describes (shared, then static);
#   4. when the build has libcairn_mpi: examples/consumer_mpi with
#      find_package(Cairn COMPONENTS mpi) and with pkg-config cairn_mpi + mpicc,
#      each run under mpirun with 2 ranks; with libcairn_veloc, VELOC's heat
#      program (tests/compat/veloc_heatdis.c) built against the installed
#      veloc.h with mpicc and run the same way; with libcairn_fti, FTI's
#      (tests/compat/fti_heat.c) against the installed fti.h.
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
export TMPDIR="$work"

step "find_package(Cairn): examples/consumer"
if ! { cmake -S "$root/examples/consumer" -B "$work/consumer" -DCMAKE_BUILD_TYPE=Release \
          -DCMAKE_PREFIX_PATH="$prefix" && cmake --build "$work/consumer"; } \
     >"$work/consumer.log" 2>&1; then
  cat "$work/consumer.log" >&2
  echo "install_test: building examples/consumer against the install failed" >&2
  exit 1
fi
"$work/consumer/cairn_consumer"

step "pkg-config: examples/consumer_pkgconfig (shared)"
export PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
cc="${CC:-cc}"
# shellcheck disable=SC2046  # word splitting of pkg-config's output is intended
"$cc" -std=c99 -Wall -Wextra -o "$work/consumer_pc" \
  "$root/examples/consumer/main.c" $(pkg-config --cflags --libs cairn)
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$work/consumer_pc"

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
  [[ -f "$prefix/include/cairn/cairn_mpi.h" && -f "$pcdir/cairn_mpi.pc" ]] || {
    echo "install_test: cairn_mpi.h or cairn_mpi.pc missing beside libcairn_mpi.so" >&2
    exit 1
  }
  mpirun_flags=(-np 2 --oversubscribe --timeout 60 --mca btl self,vader)
  [[ "$(id -u)" -eq 0 ]] && mpirun_flags=(--allow-run-as-root "${mpirun_flags[@]}")
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  step "find_package(Cairn COMPONENTS mpi): examples/consumer_mpi"
  if ! { cmake -S "$root/examples/consumer_mpi" -B "$work/consumer_mpi" -DCMAKE_BUILD_TYPE=Release \
            -DCMAKE_PREFIX_PATH="$prefix" && cmake --build "$work/consumer_mpi"; } \
       >"$work/consumer_mpi.log" 2>&1; then
    cat "$work/consumer_mpi.log" >&2
    echo "install_test: building examples/consumer_mpi against the install failed" >&2
    exit 1
  fi
  CAIRN_SCRATCH="$work/mpi-cmake" mpirun "${mpirun_flags[@]}" "$work/consumer_mpi/cairn_consumer_mpi"

  step "pkg-config cairn_mpi + mpicc: examples/consumer_mpi"
  # shellcheck disable=SC2046
  mpicc -std=c99 -Wall -Wextra -o "$work/consumer_mpi_pc" \
    "$root/examples/consumer_mpi/main.c" $(pkg-config --cflags --libs cairn_mpi)
  CAIRN_SCRATCH="$work/mpi-pc" LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    mpirun -x CAIRN_SCRATCH -x LD_LIBRARY_PATH "${mpirun_flags[@]}" "$work/consumer_mpi_pc"

  # A VELOC program, unchanged: -I<prefix>/include -lcairn_veloc (docs/veloc.md).
  if [[ -f "$libdir/libcairn_veloc.so" ]]; then
    step "VELOC's API: tests/compat/veloc_heatdis.c against <prefix>/include/veloc.h, -lcairn_veloc"
    [[ -f "$prefix/include/veloc.h" && -f "$prefix/include/veloc/defs.h" ]] || {
      echo "install_test: veloc.h or veloc/defs.h missing beside libcairn_veloc.so" >&2
      exit 1
    }
    mpicc -std=c11 -o "$work/veloc_heatdis" "$root/tests/compat/veloc_heatdis.c" \
      -I"$prefix" -I"$prefix/include" -L"$libdir" -lcairn_veloc -Wl,-rpath-link,"$libdir"
    printf 'scratch = %s\npersistent = %s\n' "$work/veloc-s" "$work/veloc-p" > "$work/veloc.cfg"
    LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      mpirun -x LD_LIBRARY_PATH "${mpirun_flags[@]}" "$work/veloc_heatdis" "$work/veloc.cfg" mem 20 10 "$work/veloc.out"
  fi

  # An FTI program, unchanged: -I<prefix>/include -lcairn_fti (docs/fti.md).
  if [[ -f "$libdir/libcairn_fti.so" ]]; then
    step "FTI's API: tests/compat/fti_heat.c against <prefix>/include/fti.h, -lcairn_fti"
    [[ -f "$prefix/include/fti.h" ]] || {
      echo "install_test: fti.h missing beside libcairn_fti.so" >&2
      exit 1
    }
    mpicc -std=c11 -o "$work/fti_heat" "$root/tests/compat/fti_heat.c" \
      -I"$prefix" -I"$prefix/include" -L"$libdir" -lcairn_fti -Wl,-rpath-link,"$libdir"
    printf '[basic]\nnode_size = 2\nckpt_dir = %s\nglbl_dir = %s\nverbosity = 3\n' \
      "$work/fti-local" "$work/fti-global" > "$work/fti.cfg"
    LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      mpirun -x LD_LIBRARY_PATH "${mpirun_flags[@]}" "$work/fti_heat" "$work/fti.cfg" 20 "$work/fti.out"
    [[ -s "$work/fti.out" ]] || { echo "install_test: fti_heat wrote no result" >&2; exit 1; }
  fi
fi

step "OK"
