#!/usr/bin/env bash
# The application's blocking with L2 and L3 checkpoints: FTI 1.6 (built from
# source; it encodes and copies inside FTI_Checkpoint) against Cairn, whose
# levels run in the background (docs/mpi.md, "Progress"), on the same data.
#
#   bench/peers/fti_side_by_side.sh [--ranks N] [--mib M] [--checkpoints C]
#                                   [--interval-s S] [--rounds R] [--dir DIR]
#
# Three sides, each round in turn (the order reversed every other round),
# caches dropped before each:
#   fti        bench/peers/fti_levels.c against FTI 1.6 (head = 0: FTI's
#              work inline, as its default), level 2 and level 3 in turn,
#              sets of group_size = ranks nodes (local_test: one simulated
#              node per rank), its L3 Reed-Solomon;
#   cairn_fti  the same program against libcairn_fti (FTI's semantics: each
#              checkpoint waits for its level, L3 Reed-Solomon with
#              group_size / 2 rows);
#   cairn      cairn-bench-mpi --levels L1,L2,L3 --l3-code rs: Cairn's own
#              API, L2 every checkpoint and L3 every second one in the
#              background, the checkpoint call and a collective wait at
#              local per checkpoint.
# Prints each side's median blocking per checkpoint (the job's: the slowest
# rank's) and fti / cairn. FTI is built into $CAIRN_PEER_WORK (default
# /var/tmp/cairn-peers; kept) from $CAIRN_PEER_GIT, a printf pattern taking
# the repository's name (default https://github.com/leobago/%s.git). Needs
# root for drop_caches.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
repo="$PWD"

ranks=4 mib=256 checkpoints=8 interval=2 rounds=3 dir=/var/tmp/cairn-fti-bench
while (($#)); do
  case "$1" in
    --ranks) ranks="$2"; shift 2 ;;
    --mib) mib="$2"; shift 2 ;;
    --checkpoints) checkpoints="$2"; shift 2 ;;
    --interval-s) interval="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    *) echo "usage: $0 [--ranks N] [--mib M] [--checkpoints C] [--interval-s S] [--rounds R] [--dir DIR]" >&2
       exit 2 ;;
  esac
done
if [[ ! -w /proc/sys/vm/drop_caches ]]; then
  echo "$0: /proc/sys/vm/drop_caches is not writable (run as root)" >&2
  exit 2
fi
work="${CAIRN_PEER_WORK:-/var/tmp/cairn-peers}"
git_pattern="${CAIRN_PEER_GIT:-https://github.com/leobago/%s.git}"
fti_prefix="$work/fti-1.6" cairn_prefix="$work/cairn" bin="$work/bin"
mkdir -p "$work/src" "$bin"

# --- FTI 1.6 from source, Cairn installed, the program twice -------------------
if [[ ! -f "$work/stamps/fti-v1.6" ]]; then
  dpkg -s libssl-dev >/dev/null 2>&1 || apt-get install -y libssl-dev
  rm -rf "$work/src/fti"
  # shellcheck disable=SC2059
  git -c advice.detachedHead=false clone -q -b v1.6 --depth 1 "$(printf "$git_pattern" fti)" "$work/src/fti"
  cmake -S "$work/src/fti" -B "$work/src/fti/build" -DCMAKE_BUILD_TYPE=Release -DENABLE_EXAMPLES=OFF \
    -DENABLE_TESTS=OFF -DCMAKE_INSTALL_PREFIX="$fti_prefix" >"$work/src/fti.log" 2>&1
  cmake --build "$work/src/fti/build" -j "$(nproc)" --target install >>"$work/src/fti.log" 2>&1 ||
    { tail -30 "$work/src/fti.log" >&2; exit 1; }
  mkdir -p "$work/stamps" && touch "$work/stamps/fti-v1.6"
fi
[[ -f build/CMakeCache.txt ]] || cmake --preset release >/dev/null
cmake --build build -j "$(nproc)" >/dev/null 2>&1
cmake --install build --prefix "$cairn_prefix" >/dev/null
prog=bench/peers/fti_levels.c
mpicc -O2 -o "$bin/fti_levels_fti" "$prog" -I"$fti_prefix/include" -L"$fti_prefix/lib" -lfti \
  -Wl,-rpath,"$fti_prefix/lib"
mpicc -O2 -o "$bin/fti_levels_cairn_fti" "$prog" -I"$cairn_prefix/include" -L"$cairn_prefix/lib" -lcairn_fti \
  -Wl,-rpath,"$cairn_prefix/lib"

# --- trials -------------------------------------------------------------------
mpi=(mpirun --allow-run-as-root --oversubscribe -np "$ranks")
results="$work/fti_trials.tsv"
: >"$results"
cold() { sync; echo 3 >/proc/sys/vm/drop_caches; sleep 2; }
config() {  # FTI's configuration of a job in $dir
  cat >"$dir/config.fti" <<CFG
[basic]
head = 0
node_size = 1
ckpt_dir = $dir/local
glbl_dir = $dir/global
meta_dir = $dir/meta
ckpt_l1 = 0
ckpt_l2 = 0
ckpt_l3 = 0
ckpt_l4 = 0
inline_l2 = 1
inline_l3 = 1
inline_l4 = 1
keep_last_ckpt = 0
group_size = $ranks
verbosity = 2
[restart]
failure = 0
exec_id = XXXX-XX-XX_XX-XX-XX
[advanced]
block_size = 1024
transfer_size = 16
mpi_tag = 2612
local_test = 1
CFG
}
blocking_of() {  # the top-level blocking_s of the JSON report in LOG (both programs print one)
  python3 -c 'import json, sys
t = open(sys.argv[1]).read()
print(json.JSONDecoder().raw_decode(t[t.index("{"):])[0]["blocking_s"])' "$1"
}
trial() {  # trial ROUND SIDE
  local log="$work/fti_log.$2.$1" blocking
  rm -rf "$dir" && mkdir -p "$dir"/{local,global,meta}
  config
  cold
  case "$2" in
    cairn)
      "${mpi[@]}" "$repo/build/bin/cairn-bench-mpi" --levels L1,L2,L3 --l3-code rs --size "${mib}MiB" \
        --checkpoints "$checkpoints" --dir "$dir/cairn" >"$log" 2>&1 || { tail -20 "$log" >&2; exit 1; }
      ;;
    *)
      "${mpi[@]}" "$bin/fti_levels_$2" "$dir/config.fti" "$mib" "$checkpoints" "$interval" >"$log" 2>&1 ||
        { tail -20 "$log" >&2; exit 1; }
      ;;
  esac
  blocking=$(blocking_of "$log")
  printf '%s\t%s\t%s\n' "$1" "$2" "$blocking" >>"$results"
  echo "round $1 $2: blocking ${blocking}s per checkpoint"
}
for ((r = 1; r <= rounds; r++)); do
  sides=(fti cairn_fti cairn)
  ((r % 2 == 0)) && sides=(cairn cairn_fti fti)
  for s in "${sides[@]}"; do trial "$r" "$s"; done
done
rm -rf "$dir"

python3 - "$results" "$ranks" "$mib" <<'EOF'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
med = {s: statistics.median(float(b) for _, t, b in rows if t == s) for s in ("fti", "cairn_fti", "cairn")}
print(f"\n{sys.argv[2]} ranks x {sys.argv[3]} MiB, L2 and L3 in turn, medians of the rounds' medians")
print("| side | blocking per checkpoint (s) |")
print("|---|---|")
for s, b in med.items():
    print(f"| {s} | {b:.4f} |")
print(f"\nfti / cairn = {med['fti'] / med['cairn']:.2f}; fti / cairn_fti = {med['fti'] / med['cairn_fti']:.2f}")
EOF
