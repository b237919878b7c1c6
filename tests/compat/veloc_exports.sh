#!/bin/sh
# libcairn_veloc.so exports exactly the functions include/veloc.h and
# src/compat/veloc/velocf.h (the Fortran module's C side) declare
# (src/compat/veloc/veloc.map, hidden visibility otherwise): none missing, nothing
# else but the linker's own symbols.
#
#   veloc_exports.sh <nm> <libcairn_veloc.so> <include/veloc.h> [src/compat/veloc/velocf.h...]
set -u
nm=$1 lib=$2
shift 2
header="$*"
declared=$(cat "$@" | sed -n 's/^int \(VELOC_[A-Za-z_]*\)(.*/\1/p' | sort)
exported=$("$nm" -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' |
           grep -v -x -E '_init|_fini|_edata|_end|__bss_start|VELOC_CAIRN_[0-9.]+' | sort)
[ -n "$declared" ] || { echo "FAIL: no function found in $header"; exit 1; }
if [ "$declared" != "$exported" ]; then
  echo "FAIL: declared in $header but not exported, or exported but not declared:"
  printf '%s\n' "$declared" > "${TMPDIR:-/tmp}/veloc_declared.$$"
  printf '%s\n' "$exported" | diff "${TMPDIR:-/tmp}/veloc_declared.$$" - 
  rm -f "${TMPDIR:-/tmp}/veloc_declared.$$"
  exit 1
fi
echo "PASS: $(printf '%s\n' "$declared" | wc -l) functions"
