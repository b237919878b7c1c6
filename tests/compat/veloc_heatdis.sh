#!/bin/sh
# Kill and relaunch trials of tests/compat/veloc_heatdis.c and of its Fortran
# twin veloc_fortran.f90 (mem and file only) (docs/veloc.md, "Tests"):
#
#   veloc_heatdis.sh <np> <mem|file|single|region> <keep|noscratch> <program> <mpiexec> [mpiexec flags...]
#
# 1. an uninterrupted run gives the reference grid;
# 2. a run in fresh directories checkpoints every 10 of 45 iterations and
#    SIGKILLs itself after iteration 25 (once version 20 is durable);
# 3. noscratch: the scratch directory is deleted (the node's disk is lost),
#    only the persistent copies remain;
# 4. the relaunch must restart from version 20, find the older version 10
#    with a bound below 20 (max_versions = 2 keeps 10 and 20) and nothing
#    below 10, and end with the reference grid, byte for byte.
set -u
np=$1 mode=$2 scenario=$3 prog=$4 mpiexec=$5
shift 5
root=$(mktemp -d "${TMPDIR:-/tmp}/veloc_heatdis.XXXXXX") || exit 1
trap 'rm -rf "$root"' EXIT
fail() { echo "FAIL ($np ranks, $mode, $scenario): $*"; exit 1; }

config() {  # config <dir> <mode>
  mkdir -p "$1"
  cat > "$1/veloc.cfg" <<CFG
; VELOC's configuration, as its test/heatdis.cfg
scratch = $1/scratch
persistent = $1/persistent
mode = $2
max_versions = 2
CFG
}

config "$root/ref" async
"$mpiexec" -np "$np" "$@" "$prog" "$root/ref/veloc.cfg" "$mode" 45 10 "$root/ref.out" \
  > "$root/ref.log" 2>&1 || { cat "$root/ref.log"; fail "the uninterrupted run failed"; }
grep -q "start fresh" "$root/ref.log" || fail "the uninterrupted run did not start fresh"

config "$root/run" async
HEATDIS_KILL_AT=25 "$mpiexec" -np "$np" "$@" "$prog" "$root/run/veloc.cfg" "$mode" 45 10 "$root/run.out" \
  > "$root/kill.log" 2>&1
rc=$?
[ "$rc" -ne 0 ] || { cat "$root/kill.log"; fail "the killed run exited 0"; }
[ ! -e "$root/run.out" ] || fail "the killed run wrote a result"
grep -q "start fresh" "$root/kill.log" || { cat "$root/kill.log"; fail "the first run did not start fresh"; }

if [ "$scenario" = noscratch ]; then
  [ -d "$root/run/scratch" ] || fail "no scratch directory to delete"
  rm -rf "$root/run/scratch"
fi

"$mpiexec" -np "$np" "$@" "$prog" "$root/run/veloc.cfg" "$mode" 45 10 "$root/run.out" \
  > "$root/restart.log" 2>&1 || { cat "$root/restart.log"; fail "the relaunch failed"; }
cat "$root/restart.log"
grep -q "^restart from 20$" "$root/restart.log" || fail "the relaunch did not restart from version 20"
grep -q "^bound 19 -> 10$" "$root/restart.log" || fail "Restart_test(name, 19) is not 10"
grep -q "^bound 4 -> -1$" "$root/restart.log" || fail "Restart_test(name, 4) is not VELOC_FAILURE"
cmp -s "$root/ref.out" "$root/run.out" || fail "the relaunched run's grid differs from the uninterrupted run's"
if [ "$mode" = region ]; then  # it ended with VELOC_Cleanup: no scratch copy left, the persistent ones stay
  [ -d "$root/run/scratch" ] || fail "no scratch directory after the relaunch"
  left=$(find "$root/run/scratch" -name 'v*.cairn' | wc -l)
  [ "$left" -eq 0 ] || fail "VELOC_Cleanup left $left checkpoint files in the scratch directory"
  [ -n "$(find "$root/run/persistent" -name 'v*.cairn')" ] || fail "VELOC_Cleanup removed the persistent copies"
fi
echo "PASS ($np ranks, $mode, $scenario)"
