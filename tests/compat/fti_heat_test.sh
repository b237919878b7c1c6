#!/bin/bash
# FTI's heat program (fti_heat.c) killed mid-run and relaunched over
# libcairn_fti (docs/fti.md, "Tests"):
#   fti_heat_test.sh <fti_heat> <np> <scenario> <mpiexec and its flags...>
# scenarios:
#   l1        checkpoints at level 1 every 5 iterations; killed after 23,
#             resumed: must resume at 20 and end with the uninterrupted result
#   l4        level 4 only; the local directory is deleted before the relaunch
#   l2        level 2; the first simulated node's local directory is deleted
#             (its ranks come back from their partner copies)
#   l3        level 3; the same deletion (its ranks are rebuilt from the
#             parity of their sets: Reed-Solomon, or XOR without ISA-L)
#   snapshot  FTI_Snapshot at every iteration, ckpt_l1 = 4 calls, ckpt_l4 = 10
#   dcp       as l1 with enable_dcp = 1 (Cairn's hash change detection)
#   recovervar  as l1, the restart through FTI_RecoverVarInit/RecoverVar/
#             RecoverVarFinalize of datasets 0 and 1 only (dataset 2 must keep
#             the relaunch's value)
#   realloc   as l1 with a history (dataset 3) that grows at every checkpoint:
#             the restart sizes it with FTI_Realloc before FTI_Recover
#   auto      FTI_Snapshot at every iteration under [cairn] auto_level = 1,
#             mtbf_s = 1 (Young/Daly decides when): when a checkpoint happens
#             depends on time, so the run is not killed at a fixed iteration
#             but right after the first iteration >= 20 that checkpointed (S,
#             printed by the run); the relaunch must resume at S, and both it
#             and the uninterrupted run go on to S + 10
set -u
heat=$1; np=$2; scenario=$3; shift 3
run() { "$@" -np "$np" "$heat"; }
root=$(mktemp -d "${TMPDIR:-/tmp}/fti-heat.XXXXXX")
trap 'rm -rf "$root"' EXIT
fail() { echo "FAIL ($scenario, np $np): $*"; exit 1; }

node_size=1; group=2
[ "$np" -ge 4 ] && node_size=2
[ "$np" -lt 4 ] && group=$np
[ "$group" -lt 2 ] && group=2
ckpt_l1=0; ckpt_l4=0; dcp=0; level=1; every=5; auto=0
case $scenario in
  l1) ;;
  recovervar) export FTI_HEAT_RECOVER=var ;;
  realloc) export FTI_HEAT_REALLOC=1 ;;
  auto) every=0; auto=1 ;;
  l4) level=4 ;;
  l2) level=2 ;;
  l3) level=3 ;;
  snapshot) every=0; ckpt_l1=4; ckpt_l4=10 ;;
  dcp) dcp=1 ;;
  *) fail "unknown scenario" ;;
esac
config() {  # $1: directory of the job
  mkdir -p "$1/local" "$1/global" "$1/meta"
  cat > "$1/config.fti" <<CFG
[basic]
head = 0
node_size = $node_size
ckpt_dir = $1/local
glbl_dir = $1/global
meta_dir = $1/meta   # has no effect in Cairn
ckpt_l1 = $ckpt_l1
ckpt_l2 = 0
ckpt_l3 = 0
ckpt_l4 = $ckpt_l4
inline_l2 = 1
inline_l3 = 1
inline_l4 = 1
keep_last_ckpt = 0
group_size = $group
enable_dcp = $dcp
dcp_mode = 1
dcp_block_size = 4096
verbosity = 3
[restart]
failure = 0
exec_id = XXXX-XX-XX_XX-XX-XX
[advanced]
local_test = 1
CFG
  if [ "$auto" = 1 ]; then
    printf '[cairn]\nauto_level = 1\nmtbf_s = 1\n' >> "$1/config.fti"
  fi
}
export FTI_HEAT_EVERY=$every FTI_HEAT_LEVEL=$level CAIRN_FTI_INTERVAL_UNIT=calls
export CAIRN_HOST_CACHE=1MiB CAIRN_BLOCK_SIZE=64KiB CAIRN_COPY_THREADS=0 CAIRN_HOST_CACHE_INIT=lazy

# The killed run first: under auto its length decides the others'.
config "$root/job"
iterations=40; stop=23
if [ "$auto" = 1 ]; then
  iterations=1000000000; stop=20   # it stops at the gate, long before
  export FTI_HEAT_STOP_AFTER_CKPT=1 FTI_HEAT_STOP_REPORT="$root/job/stopped"
fi
FTI_HEAT_STOP_AT=$stop "$@" -np "$np" "$heat" "$root/job/config.fti" $iterations "$root/job/result" > "$root/job/out1" 2>&1
[ -e "$root/job/result" ] && fail "the killed run finished"
unset FTI_HEAT_STOP_AFTER_CKPT FTI_HEAT_STOP_REPORT
iterations=40; expect=20
[ "$scenario" = snapshot ] && expect=23   # the 24th call (4 | 24) checkpointed before iteration 23
if [ "$auto" = 1 ]; then
  expect=$(sed -n 's/^stopped after the checkpoint at iteration \([0-9]*\)$/\1/p' "$root/job/stopped" 2>/dev/null)
  [ -n "$expect" ] || { cat "$root/job/out1"; fail "the killed run did not stop after a checkpoint"; }
  iterations=$((expect + 10))
fi

config "$root/ref"
"$@" -np "$np" "$heat" "$root/ref/config.fti" $iterations "$root/ref/result" > "$root/ref/out" 2>&1 ||
  { cat "$root/ref/out"; fail "the uninterrupted run failed"; }

case $scenario in
  l4) rm -rf "$root/job/local" && mkdir "$root/job/local" ;;
  l2|l3) [ -d "$root/job/local/node0" ] || fail "no node0 directory: $(ls "$root/job/local")"
      rm -rf "$root/job/local/node0" ;;
esac
"$@" -np "$np" "$heat" "$root/job/config.fti" $iterations "$root/job/result" > "$root/job/out2" 2>&1 ||
  { cat "$root/job/out1" "$root/job/out2"; fail "the relaunch failed"; }
grep -q "resumed at iteration $expect\$" "$root/job/out2" ||
  { cat "$root/job/out2"; fail "did not resume at iteration $expect"; }
if [ "$scenario" = l2 ]; then
  grep -q "from its partner copy" "$root/job/out2" ||
    { cat "$root/job/out2"; fail "node 0's ranks were not restored from their partner copies (L2)"; }
fi
if [ "$scenario" = l3 ]; then
  grep -Eq "rebuilt from the (XOR|Reed-Solomon) parity" "$root/job/out2" ||
    { cat "$root/job/out2"; fail "node 0's ranks were not rebuilt from their set's parity (L3)"; }
fi
cmp -s "$root/ref/result" "$root/job/result" ||
  { cat "$root/ref/result" "$root/job/result"; fail "the resumed run's grid differs from the uninterrupted run's"; }
echo "PASS ($scenario, np $np): resumed at iteration $expect of $iterations"
