#!/usr/bin/env bash
# VELOC's own heat program (tests/peers/veloc/heatdis_mem.c, unchanged), linked
# three times -- against real VELOC 1.8 (async, its backend), against Cairn's
# libcairn_veloc and against a VELOC that checkpoints nothing
# (veloc_null.c) -- run side by side on the same disk directories.
#
#   bench/peers/veloc_side_by_side.sh [--ranks N] [--mib M] [--rounds R]
#                                     [--dir DIR] [--json FILE]
#
# Builds VELOC 1.8 and its components from source into $CAIRN_PEER_WORK
# (default /var/tmp/cairn-peers; kept, so later runs skip the build), and
# installs Cairn from build/ into a prefix there. Sources are cloned from
# $CAIRN_PEER_GIT, a printf pattern taking the repository's name (default
# https://github.com/ECP-VeloC/%s.git). Needs root for drop_caches.
#
# Each round runs the three sides in turn (the order reversed every other
# round). A trial: empty directories, sync + drop_caches, settle, then
#   run       mpirun of the program from scratch (3 checkpoints, 200/400/600);
#             app_s = the program's own "Execution finished in" (its loop),
#             persistent_s = the whole mpirun, VELOC_Finalize(1) waiting
#             until every version is on the persistent tier;
#   relaunch  the backend (VELOC's) killed, sync + drop_caches, a new mpirun
#             of the same program on the same directories: relaunch_s = the
#             whole mpirun; it must print that it restarts at iteration 600
#             (not for the null side, which has nothing to restart from).
# overhead_s = app_s - app_s of the null side in the same round. The table
# gives medians over the rounds; --json writes every trial and the medians.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
repo="$PWD"

ranks=2 mib=1024 rounds=3 dir=/var/tmp/cairn-peer-bench json=""
while (($#)); do
  case "$1" in
    --ranks) ranks="$2"; shift 2 ;;
    --mib) mib="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --json) json="$2"; shift 2 ;;
    *) echo "usage: $0 [--ranks N] [--mib M] [--rounds R] [--dir DIR] [--json FILE]" >&2; exit 2 ;;
  esac
done

work="${CAIRN_PEER_WORK:-/var/tmp/cairn-peers}"
git_pattern="${CAIRN_PEER_GIT:-https://github.com/ECP-VeloC/%s.git}"
veloc_prefix="$work/veloc-1.8"
cairn_prefix="$work/cairn"
bin="$work/bin"
mkdir -p "$work" "$bin"

fs_type="$(stat -f -c %T "$(dirname "$dir")")"
if [[ "$fs_type" == tmpfs || "$fs_type" == ramfs ]]; then
  echo "$0: $dir is on $fs_type; the comparison is about a disk (--dir)" >&2
  exit 2
fi
if [[ ! -w /proc/sys/vm/drop_caches ]]; then
  echo "$0: /proc/sys/vm/drop_caches is not writable (run as root)" >&2
  exit 2
fi

# --- the peer, from source ----------------------------------------------------
need_pkgs=()
for p in libssl-dev zlib1g-dev libboost-dev; do
  dpkg -s "$p" >/dev/null 2>&1 || need_pkgs+=("$p")
done
if ((${#need_pkgs[@]})); then
  sudo_cmd=""; [[ $(id -u) -ne 0 ]] && sudo_cmd=sudo
  $sudo_cmd apt-get install -y "${need_pkgs[@]}"
fi

build_component() {  # build_component REPO TAG [CMAKE ARGS...]
  local name="$1" tag="$2" src="$work/src/$1"
  shift 2
  [[ -f "$work/stamps/$name-$tag" ]] && return 0
  rm -rf "$src"
  # shellcheck disable=SC2059
  git -c advice.detachedHead=false clone -q -b "$tag" --depth 1 "$(printf "$git_pattern" "$name")" "$src"
  cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DENABLE_TESTS=OFF \
    -DCMAKE_INSTALL_PREFIX="$veloc_prefix" -DCMAKE_PREFIX_PATH="$veloc_prefix" "$@" >"$src.log" 2>&1
  cmake --build "$src/build" -j "$(nproc)" --target install >>"$src.log" 2>&1 ||
    { tail -30 "$src.log" >&2; exit 1; }
  mkdir -p "$work/stamps" && touch "$work/stamps/$name-$tag"
}
# The versions VELOC 1.8's auto-install.py pins (its transfer module includes
# AXL's header even when AXL is not used).
build_component KVTree v1.4.0
build_component AXL v0.8.0
build_component rankstr v0.3.0
build_component shuffile v0.3.0
build_component redset v0.3.0
build_component er v0.4.0
# auto-install.py's defaults: the socket queue, O_DIRECT transfers.
build_component VELOC veloc-1.8 -DCOMM_QUEUE=socket_queue -DPOSIX_IO=direct

# --- Cairn, installed, and the three programs ---------------------------------
[[ -f build/CMakeCache.txt ]] || cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCAIRN_WITH_MPI=ON >/dev/null
cmake --build build -j "$(nproc)" >/dev/null 2>&1
cmake --install build --prefix "$cairn_prefix" >/dev/null
prog=tests/peers/veloc/heatdis_mem.c
mpicc -O2 -o "$bin/heatdis_veloc" "$prog" -I"$veloc_prefix" -I"$veloc_prefix/include" \
  -L"$veloc_prefix/lib" -lveloc-client -Wl,-rpath,"$veloc_prefix/lib" -lm
mpicc -O2 -o "$bin/heatdis_cairn" "$prog" -I"$cairn_prefix" -L"$cairn_prefix/lib" -lcairn_veloc \
  -Wl,-rpath,"$cairn_prefix/lib" -lm
mpicc -O2 -shared -fPIC -o "$bin/libveloc_null.so" bench/peers/veloc_null.c -I"$cairn_prefix"
mpicc -O2 -o "$bin/heatdis_null" "$prog" -I"$cairn_prefix" -L"$bin" -lveloc_null -Wl,-rpath,"$bin" -lm

# --- trials -------------------------------------------------------------------
cfg="$work/heatdis.cfg"
# VELOC's own test configuration (test/heatdis.in), on $dir.
cat >"$cfg" <<EOF
scratch = $dir/scratch
persistent = $dir/persistent
meta = $dir/meta
max_versions = 2
scratch_versions = 1
mode = async
chksum = true
EOF
mpi=(mpirun --allow-run-as-root --oversubscribe -np "$ranks")
results="$work/trials.tsv"
: >"$results"

stop_backend() {
  pkill -x veloc-backend 2>/dev/null || true
  while pgrep -x veloc-backend >/dev/null; do sleep 0.1; done
  rm -f "/dev/shm/veloc-backend-ready-$(id -u)"
}
cold() {  # the page cache dropped, freed memory settled
  sync
  echo 3 >/proc/sys/vm/drop_caches
  sleep 2
}
timed() {  # timed LOG CMD...: runs CMD, prints its wall seconds
  local log="$1" t0 t1
  shift
  t0=$(date +%s.%N)
  "$@" >"$log.out" 2>&1 || { echo "$0: $* failed (log $log.out):" >&2; tail -20 "$log.out" >&2; exit 1; }
  t1=$(date +%s.%N)
  echo "$t0 $t1" | awk '{printf "%.3f", $2 - $1}'
}
trial() {  # trial ROUND SIDE
  local round="$1" side="$2" log="$work/log.$2.$1" run_s relaunch_s app_s
  stop_backend
  rm -rf "$dir" && mkdir -p "$dir"/{scratch,persistent,meta}
  cold
  run_s=$(timed_run "$log.run" "$side")
  app_s=$(sed -n 's/^Execution finished in \([0-9.]*\) seconds.*/\1/p' "$log.run.out")
  stop_backend
  relaunch_s=0
  if [[ "$side" == null ]]; then  # nothing to restart from: it would run again
    printf '%s\t%s\t%s\t%s\t%s\n' "$round" "$side" "$app_s" "$run_s" "$relaunch_s" >>"$results"
    echo "round $round $side: app ${app_s}s, run ${run_s}s"
    return
  fi
  cold
  relaunch_s=$(timed_run "$log.relaunch" "$side")
  stop_backend
  if ! grep -q "^Previous checkpoint found at iteration 600," "$log.relaunch.out"; then
    echo "$0: $side's relaunch did not restart at iteration 600 ($log.relaunch.out)" >&2
    exit 1
  fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$round" "$side" "$app_s" "$run_s" "$relaunch_s" >>"$results"
  echo "round $round $side: app ${app_s}s, run ${run_s}s, relaunch ${relaunch_s}s"
}
timed_run() {  # timed_run LOG SIDE
  # Only VELOC's side gets an environment: its installed client finds its
  # modules library and its backend only so. Cairn's and the null side start
  # with none, as the installed programs must.
  local env=()
  [[ "$2" == veloc ]] && env=(-x "LD_LIBRARY_PATH=$veloc_prefix/lib" -x "VELOC_BIN=$veloc_prefix/bin")
  timed "$1" "${mpi[@]}" "${env[@]}" "$bin/heatdis_$2" "$mib" "$cfg"
}

for ((r = 1; r <= rounds; r++)); do
  sides=(null veloc cairn)
  ((r % 2 == 0)) && sides=(cairn veloc null)
  for s in "${sides[@]}"; do trial "$r" "$s"; done
done
rm -rf "$dir"

python3 - "$results" "$json" "$ranks" "$mib" <<'EOF'
import json, statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
trials = [dict(round=int(r), side=s, app_s=float(a), run_s=float(w), relaunch_s=float(x))
          for r, s, a, w, x in rows]
null = {t["round"]: t["app_s"] for t in trials if t["side"] == "null"}
for t in trials:
    t["overhead_s"] = t["app_s"] - null[t["round"]]
med = {}
for side in ("null", "veloc", "cairn"):
    ts = [t for t in trials if t["side"] == side]
    med[side] = {k: statistics.median(t[k] for t in ts)
                 for k in ("app_s", "overhead_s", "run_s", "relaunch_s")}
print(f"\nheatdis_mem, {sys.argv[3]} ranks x {sys.argv[4]} MiB, medians of {len(null)} rounds")
print("| side | app (s) | overhead (s) | until persistent (s) | relaunch (s) |")
print("|---|---|---|---|---|")
for side, m in med.items():
    relaunch = "-" if side == "null" else f"{m['relaunch_s']:.2f}"
    print(f"| {side} | {m['app_s']:.2f} | {m['overhead_s']:.2f} | {m['run_s']:.2f} | {relaunch} |")
v, c = med["veloc"], med["cairn"]
nulls = sorted(null.values())
print(f"null side's loop time spread over the rounds: {nulls[-1] - nulls[0]:.2f} s")
ratio = v["overhead_s"] / c["overhead_s"] if c["overhead_s"] > 0 else None
if ratio is None:
    print(f"overhead VELOC {v['overhead_s']:.2f} s, Cairn {c['overhead_s']:.2f} s: Cairn's is not above zero, "
          "below what this run resolves (see the spread)")
else:
    print(f"overhead VELOC / Cairn = {v['overhead_s']:.2f} / {c['overhead_s']:.2f} = {ratio:.1f}x")
print(f"relaunch Cairn / VELOC = {c['relaunch_s']:.2f} / {v['relaunch_s']:.2f} = "
      f"{c['relaunch_s'] / v['relaunch_s']:.2f}x")
if sys.argv[2]:
    json.dump({"ranks": int(sys.argv[3]), "mib": int(sys.argv[4]), "trials": trials,
               "median": med, "overhead_ratio_veloc_over_cairn": ratio,
               "relaunch_ratio_cairn_over_veloc": c["relaunch_s"] / v["relaunch_s"]},
              open(sys.argv[2], "w"), indent=1)
EOF
