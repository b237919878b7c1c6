#!/bin/sh
# libcairn_veloc reads VELOC's configuration file (docs/veloc.md,
# "Configuration"): each bad file fails VELOC_Init with a message that names
# the problem, on one rank and on two; ignored keys are noted; VELOC_<KEY>
# overrides the file.
#
#   veloc_config.sh <veloc_heatdis> <mpiexec> [mpiexec flags...]
set -u
prog=$1 mpiexec=$2
shift 2
root=$(mktemp -d "${TMPDIR:-/tmp}/veloc_config.XXXXXX") || exit 1
trap 'rm -rf "$root"' EXIT
failures=0

# check <name> <np> <expected stderr text> <file content> [mpiexec flags...]
check() { expect_error_flags "$@"; }
expect_error_flags() {
  name=$1 np=$2 text=$3 content=$4
  shift 4
  printf '%s\n' "$content" > "$root/$name.cfg"
  if "$mpiexec" -np "$np" "$@" "$prog" "$root/$name.cfg" mem 10 5 "$root/$name.out" > "$root/$name.log" 2>&1; then
    echo "FAIL $name: VELOC_Init accepted it"; failures=$((failures + 1)); return
  fi
  if ! grep -qF "$text" "$root/$name.log"; then
    echo "FAIL $name: the error does not say: $text"; cat "$root/$name.log"; failures=$((failures + 1)); return
  fi
  if ! grep -q "Error initializing VELOC" "$root/$name.log"; then
    echo "FAIL $name: VELOC_Init did not return VELOC_FAILURE"; cat "$root/$name.log"; failures=$((failures + 1)); return
  fi
  echo "ok $name ($np ranks)"
}

s="scratch = $root/s"
p="persistent = $root/p"
for np in 1 2; do
  check unknown_key $np "unknown key 'scrach'" "scrach = $root/s
$p" "$@"
  check no_persistent $np "'persistent' is missing or empty" "$s" "$@"
  check empty_scratch $np "'scratch' is missing or empty" "scratch =
$p" "$@"
  check bad_mode $np "mode = 'fast' is invalid, must be sync or async" "$s
$p
mode = fast" "$@"
  check bad_versions $np "max_versions = '-1' is not a count" "$s
$p
max_versions = -1" "$@"
  check section $np "VELOC's configuration has no sections" "[veloc]
$s
$p" "$@"
  check twice $np "'scratch' is set twice" "$s
$s
$p" "$@"
  check not_key_value $np "is not a key = value line" "$s
$p
scratch_only" "$@"
  check same_dirs $np "storage.persistent" "$s
persistent = $root/s" "$@"
done
if "$mpiexec" -np 1 "$@" "$prog" "$root/missing.cfg" mem 10 5 "$root/m.out" > "$root/missing.log" 2>&1 ||
   ! grep -qF "cannot open VELOC configuration file '$root/missing.cfg'" "$root/missing.log"; then
  echo "FAIL missing file"; cat "$root/missing.log"; failures=$((failures + 1))
else
  echo "ok missing file"
fi

# Ignored keys are accepted and noted; VELOC_SCRATCH stands in for scratch.
printf '%s\n' "$p" "chksum = true" "; a comment" "ec_interval = 0   ; inline comment" > "$root/ok.cfg"
if ! VELOC_SCRATCH="$root/s" "$mpiexec" -np 2 "$@" "$prog" "$root/ok.cfg" mem 10 5 "$root/ok.out" > "$root/ok.log" 2>&1; then
  echo "FAIL ignored keys / VELOC_SCRATCH: the run failed"; cat "$root/ok.log"; failures=$((failures + 1))
elif ! grep -qF "'chksum' is ignored under Cairn" "$root/ok.log" || ! [ -d "$root/s" ]; then
  echo "FAIL ignored keys / VELOC_SCRATCH: no note or no scratch directory"; cat "$root/ok.log"; failures=$((failures + 1))
else
  echo "ok ignored keys, VELOC_SCRATCH"
fi

[ "$failures" -eq 0 ] || { echo "FAIL: $failures cases"; exit 1; }
echo PASS
