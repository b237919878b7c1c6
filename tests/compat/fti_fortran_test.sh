#!/bin/bash
# fti_fortran.f90 on <np> ranks with a fresh configuration and directories:
#   fti_fortran_test.sh <fti_fortran> <np> <mpiexec and its flags...>
set -u
bin=$1; np=$2; shift 2
root=$(mktemp -d "${TMPDIR:-/tmp}/fti-fortran.XXXXXX")
trap 'rm -rf "$root"' EXIT
printf '[basic]\nhead = 0\nnode_size = 1\nckpt_dir = %s/local\nglbl_dir = %s/global\nverbosity = 3\n[advanced]\nlocal_test = 1\n' \
  "$root" "$root" > "$root/config.fti"
CAIRN_HOST_CACHE=1MiB CAIRN_BLOCK_SIZE=64KiB CAIRN_COPY_THREADS=0 "$@" -np "$np" "$bin" "$root/config.fti"
