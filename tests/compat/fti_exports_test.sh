#!/bin/bash
# libcairn_fti.so exports FTI's API (include/fti.h) and nothing else
# (src/compat/fti/fti.map):  fti_exports_test.sh <nm> <libcairn_fti.so> <fti.h>
set -u
nm=$1; lib=$2; header=$3
exported=$("$nm" -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' | sort -u)
extra=$(echo "$exported" | grep -v -E '^(FTI_[A-Za-z0-9_]+|_init|_fini|_edata|_end|__bss_start|CAIRN_FTI_[0-9.]+)$')
[ -z "$extra" ] || { echo "FAIL: exported beyond FTI's API:"; echo "$extra"; exit 1; }
# Every function and variable fti.h declares is exported.
missing=0
for name in $(grep -oE '\b(FTI_[A-Za-z]+)\(' "$header" | tr -d '(' | sort -u) \
            $(grep -oE 'extern (MPI_Comm|fti_id_t) FTI_[A-Z_]+' "$header" | awk '{print $3}'); do
  echo "$exported" | grep -qx "$name" || { echo "FAIL: $name is declared in fti.h but not exported"; missing=1; }
done
exit $missing
