#!/bin/bash
# fti_device.c on <np> ranks with a fresh configuration and directories:
#   fti_device_test.sh <fti_device> <fake CUDA driver> <np> <mpiexec and its flags...>
set -u
bin=$1; fake=$2; np=$3; shift 3
root=$(mktemp -d "${TMPDIR:-/tmp}/fti-device.XXXXXX")
trap 'rm -rf "$root"' EXIT
printf '[basic]\nhead = 0\nnode_size = 1\nckpt_dir = %s/local\nglbl_dir = %s/global\nverbosity = 3\n[advanced]\nlocal_test = 1\n' \
  "$root" "$root" > "$root/config.fti"
CAIRN_CUDA_DRIVER=$fake CAIRN_HOST_CACHE=4MiB CAIRN_BLOCK_SIZE=256KiB CAIRN_COPY_THREADS=0 "$@" -np "$np" "$bin" "$fake" "$root/config.fti"
