#!/bin/sh
# SIGKILL trials (tests/mpi/kill_test.c says what each trial checks).
#
#   kill_trials.sh <np> <trials> <first seed> <kill_test> <mpirun> [mpirun flags...]
#
# Trial i uses seed <first seed> + i: a job of <np> ranks in which one rank
# SIGKILLs itself (mpirun then ends the job, bounded by its --timeout), then a
# relaunched job on the same files that must restore correctly. The seeds are
# printed; CAIRN_KILL_SEED=<seed> runs that one trial alone (a replay).
# Exits 1 on the first failing trial, naming its seed.
set -u
np=$1 trials=$2 first=$3 prog=$4
shift 4
if [ -n "${CAIRN_KILL_SEED:-}" ]; then first=$CAIRN_KILL_SEED trials=1; fi
base=$(mktemp -d "${TMPDIR:-/tmp}/cairn-kill-test.XXXXXX") || exit 2
trap 'rm -rf "$base"' EXIT
i=0
while [ "$i" -lt "$trials" ]; do
  seed=$((first + i))
  root=$base/trial$seed
  mkdir -p "$root" || exit 2
  echo "=== trial $((i + 1))/$trials: $np ranks, seed $seed (replay: CAIRN_KILL_SEED=$seed)"
  "$@" -np "$np" "$prog" run "$root" "$seed" >"$base/run.log" 2>&1
  rc=$?
  grep '^kill_test\|SIGKILL at' "$base/run.log"
  # The killed job fails (mpirun reports the signal); a job whose kill point
  # lay past its end must succeed. Any other failure of the first job fails.
  if [ "$rc" -ne 0 ] && ! grep -q 'SIGKILL at' "$base/run.log"; then
    cat "$base/run.log"
    echo "FAILED: the first job of seed $seed failed (exit $rc) without a kill"
    exit 1
  fi
  [ "$rc" -eq 0 ] && echo "(no kill: the kill point lay past the job's end)"
  if ! "$@" -np "$np" "$prog" check "$root" "$seed"; then
    echo "FAILED: the relaunched job of seed $seed (replay: CAIRN_KILL_SEED=$seed)"
    exit 1
  fi
  rm -rf "$root"
  i=$((i + 1))
done
echo "all $trials trials passed"
