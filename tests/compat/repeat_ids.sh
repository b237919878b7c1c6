#!/bin/sh
# tests/compat/repeat_ids.c's two phases in fresh directories, 2 ranks:
#   repeat_ids.sh <veloc|fti> <program> <mpiexec> [mpiexec flags...]
set -u
api=$1 prog=$2 mpiexec=$3
shift 3
root=$(mktemp -d "${TMPDIR:-/tmp}/repeat_ids.XXXXXX") || exit 2
trap 'rm -rf "$root"' EXIT
if [ "$api" = veloc ]; then
  printf 'scratch = %s/s\npersistent = %s/p\nmode = async\n' "$root" "$root" > "$root/cfg"
else
  printf '[basic]\nnode_size = 2\nckpt_dir = %s/l\nglbl_dir = %s/g\nverbosity = 3\n' "$root" "$root" > "$root/cfg"
fi
"$mpiexec" -np 2 "$@" "$prog" "$api" take "$root/cfg" || exit 1
"$mpiexec" -np 2 "$@" "$prog" "$api" check "$root/cfg" || exit 1
