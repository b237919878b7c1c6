#!/usr/bin/env bash
# The GPU-tier measurements of docs/bench.md ("Measured against the fake
# driver"), run against the fake CUDA driver: an emulation of the scheduling
# (no GPU needed), not GPU performance. Writes one JSON (and the stdout
# table) per trial into OUT_DIR and prints the medians.
#
#   bench/figures/fake_gpu_sweep.sh [OUT_DIR] [TRIALS]     (defaults: a temp dir, 3)
#
# Needs a Release build in build/ with cuda.h found (build/lib/libcairn_fake_cuda.so).
# Configurations are interleaved within each trial so that they see the same
# memory state (docs/bench.md, "Memory state on this VM").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out="${1:-$(mktemp -d "${TMPDIR:-/tmp}/cairn-fake-gpu.XXXXXX")}"
trials="${2:-3}"
bench=build/bin/cairn-bench
fake=$PWD/build/lib/libcairn_fake_cuda.so
[[ -x $bench && -f $fake ]] || { echo "fake_gpu_sweep.sh: build/ needs cairn-bench and the fake driver" >&2; exit 2; }
mkdir -p "$out"
export CAIRN_CUDA_DRIVER=$fake CAIRN_FAKE_CUDA_POPULATE=1
common=(uniform --memory device --count 32 --size 32MiB --interval-ms 10 --limits-size 64MiB --quiet)
run() {  # run NAME [env...] -- [options...]
  local name=$1; shift
  local -a envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" "$bench" "${common[@]}" "$@" --json "$out/$name.json" >"$out/$name.txt" 2>&1
}
for r in $(seq 1 "$trials"); do
  # Incremental vs direct device cache, mapping/allocation at 1 GB/s.
  for init in incremental direct; do
    run "A-$init-$r" CAIRN_FAKE_CUDA_MAP_GBPS=1 CAIRN_FAKE_CUDA_ALLOC_GBPS=1 -- \
      --device-cache 2GiB --device-cache-init "$init" --device-map-chunk 256MiB --host-cache 1GiB --mode async
  done
  # Large-device vs large-host vs no device cache, with the sync baseline.
  run "B-large-device-$r" -- --device-cache 1GiB --host-cache 256MiB --mode both
  run "B-large-host-$r" -- --device-cache 256MiB --host-cache 1GiB --mode both
  run "B-none-$r" -- --device-cache 0 --host-cache 1GiB --mode both
done
python3 - "$out" <<'PY'
import collections, glob, json, os, statistics, sys
runs = collections.defaultdict(list)
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    d = json.load(open(f))
    name = os.path.basename(f).rsplit("-", 1)[0]
    runs[name].append({
        "open_s": d["async"]["init"]["open_s"], "forward_s": d["forward"]["blocking_s"],
        "backward_s": d["backward"]["blocking_s"], "waited_for_mapping_s": d["device"]["capture_blocked_s"],
        "device_hits": d["device"]["hits"], "device_prefetch_bytes": d["device"]["prefetch_bytes"],
        "sync_to_async_total": d["ratios"]["sync_to_async_total_blocking"]})
for name, rs in runs.items():
    med = {k: statistics.median([r[k] for r in rs if r[k] is not None]) if any(r[k] is not None for r in rs) else None
           for k in rs[0]}
    med["open+fwd+bwd_s"] = statistics.median([r["open_s"] + r["forward_s"] + r["backward_s"] for r in rs])
    print(name, f"({len(rs)} trials):", ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in med.items()))
PY
echo "results in $out"
