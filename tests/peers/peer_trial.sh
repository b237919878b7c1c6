#!/bin/sh
# One kill-and-relaunch trial of a VELOC or FTI program, unchanged (the
# programs in tests/peers/veloc and tests/peers/fti, with their licenses):
#
#   peer_trial.sh <kind> <np> <program> <kill_point.so> <mpiexec> [mpiexec flags...]
#
# kind: veloc_mem (VELOC's heatdis_mem), veloc_file (heatdis_file: the state
# in a routed file), veloc_fault (heatdis_fault, which
# fails by itself: PEER_REF names heatdis_mem for its reference), fti_l1,
# fti_l2, fti_l3, fti_l4 (FTI's tutorial heatdis, FTI_Snapshot at that level
# every 500 calls),
# fti_dcp (the DCP tutorial: FTI_Checkpoint(i, FTI_L4_DCP)), fti_fortran
# (examples/fheatdis.f90: FTI_Snapshot at L1, its config.fti in its directory).
# 1. an uninterrupted run gives the reference ("Step" lines of rank 0);
# 2. a run in fresh directories is SIGKILLed on every rank at a random
#    MPI_Allreduce after a random checkpoint (kill_point.c; the seed is
#    printed, PEER_SEED=<seed> replays it); veloc_fault aborts by itself;
# 3. the relaunch must resume at the iteration of the newest checkpoint the
#    killed run took, and print what the uninterrupted run printed from there.
set -u
kind=$1 np=$2 prog=$3 preload=$4 mpiexec=$5
shift 5
root=$(mktemp -d "${TMPDIR:-/tmp}/peer_trial.XXXXXX") || exit 2
trap 'rm -rf "$root"' EXIT
seed=${PEER_SEED:-$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}
say() { echo "peer_trial ($kind, $np ranks, seed $seed): $*"; }
fail() { say "FAIL: $* (replay: PEER_SEED=$seed)"; exit 1; }

config() {  # config <dir>: the program's configuration file, printed
  mkdir -p "$1/results"
  case $kind in
    veloc_*) printf 'scratch = %s/scratch\npersistent = %s/persistent\nmode = async\n' "$1" "$1" > "$1/cfg"
             echo "$1/cfg" ;;
    fti_*) level=1 node_size=$np
           case $kind in
             fti_l4) level=4 ;;
             # The partner copies and the parity span nodes: one rank per
             # simulated node (FTI's group_size is 4 by default).
             fti_l2) level=2 node_size=1 ;;
             fti_l3) level=3 node_size=1 ;;
           esac
           { printf '[basic]\nnode_size = %s\nckpt_dir = %s/local\nglbl_dir = %s/global\n' "$node_size" "$1" "$1"
             printf 'meta_dir = %s/meta\nckpt_l%s = 500\nverbosity = 2\n' "$1" "$level"
             [ "$kind" = fti_dcp ] && printf 'enable_dcp = 1\ndcp_block_size = 4096\n'
             [ "$node_size" = "$np" ] || printf '[advanced]\nlocal_test = 1\n'
           } > "$1/cfg"
           cp "$1/cfg" "$1/config.fti"  # the name FTI's Fortran example reads
           echo "$1/cfg" ;;
  esac
}
run() {  # run <dir> <program> <log> [VAR=value...]: the program, in <dir>
  dir=$1 p=$2 log=$3
  shift 3
  cfg=$(config "$dir")
  case $kind in
    veloc_*) set -- "$@" "$p" 2 "$cfg" ;;   # <mem_in_mb> <cfg_file>
    fti_*) set -- "$@" CAIRN_FTI_INTERVAL_UNIT=calls "$p" 1 "$cfg" ;;
  esac
  exports=""
  while [ $# -gt 0 ] && [ "${1#*=}" != "$1" ]; do exports="$exports -x $1"; shift; done
  # shellcheck disable=SC2086  # $exports: words on purpose
  (cd "$dir" && "$mpiexec" -np "$np" $mpiflags -x LD_PRELOAD="$preload" $exports "$@") > "$log" 2>&1
}
steps() { grep '^Step : ' "$1"; }
mpiflags="$*"

ref=${PEER_REF:-$prog}
run "$root/ref" "$ref" "$root/ref.log" || { cat "$root/ref.log"; fail "the uninterrupted run failed"; }
grep -q "rank 0 resumed" "$root/ref.log" && fail "the uninterrupted run resumed from something"
marks=$(grep '^kill_point: rank 0 checkpoint' "$root/ref.log" | sed 's/.*(reduce \([0-9]*\))/\1/')
count=$(echo "$marks" | grep -c .)
[ "$count" -ge 2 ] || { cat "$root/ref.log"; fail "the uninterrupted run took $count checkpoints, the trial needs 2"; }

if [ "$kind" = veloc_fault ]; then
  run "$root/run" "$prog" "$root/kill.log" PEER_DURABLE=1
  line=$(grep '^kill_point: rank [0-9]* MPI_Abort after' "$root/kill.log" | head -n 1)
else
  after=$((seed % (count - 1) + 1))
  first=$(echo "$marks" | sed -n "${after}p") next=$(echo "$marks" | sed -n "$((after + 1))p")
  reduces=$((seed % (next - first)))
  say "SIGKILL at the reduce $reduces after checkpoint $after of $count"
  run "$root/run" "$prog" "$root/kill.log" PEER_KILL_AFTER=$after PEER_KILL_REDUCES=$reduces &&
    { cat "$root/kill.log"; fail "the killed run exited 0"; }
  line=$(grep '^kill_point: rank 0 SIGKILL after' "$root/kill.log")
fi
[ -n "$line" ] || { cat "$root/kill.log"; fail "the run did not fail where the trial failed it"; }
newest=$(echo "$line" | sed 's/.*(iteration \([0-9-]*\)).*/\1/')
say "the killed run's newest checkpoint: iteration $newest"

run "$root/run" "$prog" "$root/restart.log" || { cat "$root/restart.log"; fail "the relaunch failed"; }
resumed=$(grep '^kill_point: rank 0 resumed at iteration' "$root/restart.log" | sed 's/.* //')
[ "$resumed" = "$newest" ] || { cat "$root/restart.log"; fail "resumed at iteration '${resumed}', the newest checkpoint was at $newest"; }
# After the resumed iteration, as uninterrupted; but for the first line
# printed after the restart: the programs print the error of their last
# reduction, which they do not checkpoint (1.0 until the first one).
after_resume() { steps "$1" | awk -v from="$resumed" '{ n = $3 + 0 } n > from' | sed 1d; }
after_resume "$root/ref.log" > "$root/ref.steps"
after_resume "$root/restart.log" > "$root/restart.steps"
[ -s "$root/ref.steps" ] || fail "the reference prints no step after iteration $resumed"
cmp -s "$root/ref.steps" "$root/restart.steps" ||
  { diff "$root/ref.steps" "$root/restart.steps"; fail "the relaunch's steps differ from the uninterrupted run's"; }
say "PASS: resumed at iteration $resumed, the newest checkpoint taken; $(wc -l < "$root/ref.steps") step lines as uninterrupted"
