#!/bin/bash
# Bad FTI configuration files: FTI_Init fails on every rank (fti_heat exits 2)
# with a message naming what is wrong (docs/fti.md, "Configuration"). The
# parser's cases are unit tests (src/compat/fti/fti_config_test.cpp); these are the
# ones that need the ranks (node sizes, a missing file) and one parse error
# seen through FTI_Init (each mpirun costs seconds: keep the cases few):
#   fti_bad_config_test.sh <fti_heat> <mpiexec and its flags...>   (runs -np 2)
set -u
heat=$1; shift
mpi=("$@")
root=$(mktemp -d "${TMPDIR:-/tmp}/fti-badcfg.XXXXXX")
export CAIRN_HOST_CACHE=1MiB CAIRN_BLOCK_SIZE=64KiB CAIRN_COPY_THREADS=0 CAIRN_HOST_CACHE_INIT=lazy
trap 'rm -rf "$root"' EXIT
failed=0
base() {
  printf '[basic]\nhead = 0\nnode_size = 1\nckpt_dir = %s/local\nglbl_dir = %s/global\n' "$root" "$root"
  printf 'ckpt_l1 = 1\nverbosity = 3\n[advanced]\nlocal_test = 1\n'
}
# check <name> <expected message (grep -E)> [config text; none: no file]
check() {
  local cfg="$root/$1.fti"
  [ $# -ge 3 ] && printf '%s\n' "$3" > "$cfg"
  "${mpi[@]}" -np 2 "$heat" "$cfg" 10 "$root/result" > "$root/out" 2>&1
  local rc=$?
  if [ "$rc" -ne 2 ] || ! grep -Eq "$2" "$root/out"; then
    echo "FAIL $1: exit $rc (want 2), want a message matching '$2'; got:"; cat "$root/out"; failed=1
  else
    echo "ok   $1: $(grep -Eo "$2" "$root/out" | head -1)"
  fi
}
# The good configuration runs (so that the failures below are the keys').
base > "$root/good.fti"
"${mpi[@]}" -np 2 "$heat" "$root/good.fti" 10 "$root/result" > "$root/out" 2>&1 ||
  { echo "FAIL: the good configuration failed"; cat "$root/out"; exit 1; }
check head 'head = 1 asks for a dedicated FTI head rank' "$(base | sed 's/head = 0/head = 1/')"
check node_size 'node_size = 3 does not divide the 2 ranks' "$(base | sed 's/node_size = 1/node_size = 3/')"
check real_nodes "node_size = 1, but rank [01]'s node runs 2 ranks" "$(base | sed 's/local_test = 1/local_test = 0/')"
check no_file "cannot read the FTI configuration file"
exit $failed
