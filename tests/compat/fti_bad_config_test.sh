#!/bin/bash
# Bad FTI configuration files: FTI_Init fails on every rank (fti_heat exits 2)
# with a message naming what is wrong (docs/fti.md, "Configuration"):
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
check unknown_key "unknown key 'ckpt_l5' in \[basic\]" "$(base; printf '[basic]\nckpt_l5 = 3\n')"
check unknown_section 'unknown section \[extra\]' "$(base; printf '[extra]\nx = 1\n')"
check missing_glbl 'glbl_dir is missing' "$(base | grep -v glbl_dir)"
check not_a_number "ckpt_l1 is 'often'; it must be a whole number" "$(base | sed 's/ckpt_l1 = 1/ckpt_l1 = often/')"
check node_size 'node_size = 3 does not divide the 2 ranks' "$(base | sed 's/node_size = 1/node_size = 3/')"
check real_nodes "node_size = 1, but rank [01]'s node runs 2 ranks" "$(base | sed 's/local_test = 1/local_test = 0/')"
check staging 'staging \(FTI_SendFile\) is not provided' "$(base; printf '[basic]\nenable_staging = 1\n')"
check dcp_block 'dcp_block_size is .100.; it must be a whole number from 512' "$(base; printf '[basic]\ndcp_block_size = 100\n')"
check not_key_value "'ckpt_l2' is not 'key = value'" "$(base; printf '[basic]\nckpt_l2\n')"
check no_file "cannot read the FTI configuration file"
exit $failed
