#!/usr/bin/env python3
"""waste_vs_mtbf.py: expected waste against MTBF (CCGrid'20 Fig. 3c) from this
machine's measured checkpoint and restart costs.

For each size it runs `cairn-bench restart` (docs/bench.md) once, Cairn and
the synchronous baseline (write + fsync per checkpoint, the paper's "initial"
version) interleaved, and takes
  C  the median blocking time of a checkpoint call (restart.checkpoint_blocking_s)
  R  the restart as users know it: a new process restores the newest version
     from files whose page cache was dropped (restart.cold_restore_s)
Then, with the formulas of cairn_checkpoint_due (src/models/interval_model.hpp,
docs/design.md "When to checkpoint"; the paper's Eq. 1 and 2, D = 0):
  T_opt(M)   = max(C, sqrt(2 C (M - R)))
  W(T, M)    = 1 - (1 - C/T)(1 - (R + T/2)/M)    (clamped to [0, 1])
it draws T_opt and W(T_opt) against the MTBF M for Cairn and the baseline,
and W for fixed intervals (what a code that checkpoints every N seconds
wastes), into docs/img/waste_vs_mtbf.png, and prints the Markdown table of
docs/design.md. Cheap: 4 checkpoints 300 ms apart per size and mode, plus a
cold restart each (about 30 s here when the machine is idle).

Usage: bench/figures/waste_vs_mtbf.py [--bench build/bin/cairn-bench]
                              [--sizes 16MiB,64MiB,256MiB] [--out PNG]
                              [--json FILE] [--costs FILE] [--quick]
--quick: one 4 MiB size and no plot unless --out is given (the smoke test).
--costs FILE redraws from what --json wrote, without measuring.
Needs matplotlib for the plot (pip install matplotlib); without it the table
is still printed. Exit: 0 ok, 1 a run failed, 2 usage.
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

FIXED_INTERVALS_S = [10.0, 60.0, 600.0]
MTBF_MIN_S, MTBF_MAX_S = 10.0, 7 * 86400.0


def optimal_interval(c: float, r: float, m: float) -> float:
    """T_opt = max(C, sqrt(2 C (M - R))) (src/models/interval_model.cpp)."""
    return max(c, math.sqrt(2 * c * max(m - r, 0.0)))


def expected_waste(c: float, r: float, m: float, t: float) -> float:
    """W = 1 - (1 - C/T)(1 - (R + T/2)/M), clamped to [0, 1]."""
    if m <= 0:
        return 1.0
    if c <= 0 and t <= 0:
        return min(max(r / m, 0.0), 1.0)
    if t <= 0:
        return 1.0
    work = (1 - c / t) * (1 - (r + t / 2) / m)
    return 1.0 if work <= 0 else min(max(1 - work, 0.0), 1.0)


def measure(bench: str, size: str, json_dir: Path) -> dict[str, float]:
    out = json_dir / f"restart-{size}.json"
    cmd = [bench, "restart", "--size", size, "--count", "4", "--interval-ms", "300", "--mode", "both",
           "--sync-other", "off", "--quiet", "--json", str(out)]
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()[-2000:]}")
    doc = json.loads(out.read_text(encoding="utf-8"))
    a, s = doc["async"]["restart"], doc["sync"]["restart"]
    return {
        "cairn_c": a["checkpoint_blocking_s"], "cairn_r": a["cold_restore_s"],
        "sync_c": s["checkpoint_blocking_s"], "sync_r": s["cold_restore_s"],
    }


def mtbf_grid(n: int = 200) -> list[float]:
    lo, hi = math.log10(MTBF_MIN_S), math.log10(MTBF_MAX_S)
    return [10 ** (lo + (hi - lo) * i / (n - 1)) for i in range(n)]


def table(costs: dict[str, dict[str, float]]) -> str:
    rows = ["| size | Cairn C | Cairn R | sync C | sync R | T_opt at 1 h: Cairn / sync | waste at 1 h: Cairn / sync |",
            "|---|---|---|---|---|---|---|"]
    for size, k in costs.items():
        m = 3600.0
        tc, ts = optimal_interval(k["cairn_c"], k["cairn_r"], m), optimal_interval(k["sync_c"], k["sync_r"], m)
        wc = expected_waste(k["cairn_c"], k["cairn_r"], m, tc)
        ws = expected_waste(k["sync_c"], k["sync_r"], m, ts)
        rows.append(f"| {size} | {k['cairn_c'] * 1e3:.2f} ms | {k['cairn_r'] * 1e3:.0f} ms | "
                    f"{k['sync_c'] * 1e3:.1f} ms | {k['sync_r'] * 1e3:.0f} ms | "
                    f"{tc:.1f} s / {ts:.1f} s | {wc * 100:.3f}% / {ws * 100:.3f}% |")
    return "\n".join(rows)


def plot(costs: dict[str, dict[str, float]], out: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("waste_vs_mtbf: matplotlib missing (pip install matplotlib): no plot", file=sys.stderr)
        return False
    grid = mtbf_grid()
    fig, (ax_t, ax_w) = plt.subplots(1, 2, figsize=(12, 4.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (size, k) in enumerate(costs.items()):
        color = colors[i % len(colors)]
        for who, style in (("cairn", "-"), ("sync", "--")):
            c, r = k[f"{who}_c"], k[f"{who}_r"]
            label = f"{size} {'Cairn' if who == 'cairn' else 'sync write+fsync'}"
            ts = [optimal_interval(c, r, m) for m in grid]
            ax_t.plot(grid, ts, style, color=color, label=label)
            ax_w.plot(grid, [100 * expected_waste(c, r, m, t) for m, t in zip(grid, ts)], style,
                      color=color, label=f"{label}, T_opt")
    largest = list(costs)[-1]
    k = costs[largest]
    for j, t in enumerate(FIXED_INTERVALS_S):
        ax_w.plot(grid, [100 * expected_waste(k["cairn_c"], k["cairn_r"], m, t) for m in grid], ":",
                  color="0.2", linewidth=1 + j * 0.7, label=f"{largest} Cairn, every {t:g} s")
    for ax in (ax_t, ax_w):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("MTBF (s)")
        ax.grid(True, which="both", alpha=0.3)
        for x, name in ((3600, "1 h"), (86400, "1 day")):
            ax.axvline(x, color="0.6", linewidth=0.8)
            ax.text(x, ax.get_ylim()[0], f" {name}", rotation=90, va="bottom", fontsize=8, color="0.4")
    ax_t.set_ylabel("optimal interval T_opt (s)")
    ax_t.set_title("T_opt = max(C, sqrt(2 C (MTBF - R)))")
    ax_w.set_ylabel("expected waste (%)")
    ax_w.set_ylim(1e-2, 100)
    ax_w.set_title("waste = 1 - (1 - C/T)(1 - (R + T/2)/MTBF)")
    ax_t.legend(fontsize=7)
    ax_w.legend(fontsize=6, ncol=2)
    fig.suptitle("Checkpoint interval and waste against MTBF, costs measured on this machine "
                 "(C: blocking per checkpoint, R: cold restart)", fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return True


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--bench", default="build/bin/cairn-bench")
    ap.add_argument("--sizes", default="16MiB,64MiB,256MiB")
    ap.add_argument("--out", default=None, help="PNG (default docs/img/waste_vs_mtbf.png, none with --quick)")
    ap.add_argument("--json", default=None, help="also write the measured costs here")
    ap.add_argument("--costs", default=None, help="redraw from the costs a --json run wrote (no measuring)")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    sizes = ["4MiB"] if args.quick else [s for s in args.sizes.split(",") if s]
    out = args.out if args.out is not None else (None if args.quick else "docs/img/waste_vs_mtbf.png")
    costs: dict[str, dict[str, float]] = {}
    if args.costs:
        costs = json.loads(Path(args.costs).read_text(encoding="utf-8"))
    else:
        with tempfile.TemporaryDirectory(prefix="cairn-waste-") as tmp:
            try:
                for size in sizes:
                    costs[size] = measure(args.bench, size, Path(tmp))
            except (RuntimeError, subprocess.TimeoutExpired, KeyError, ValueError) as e:
                print(f"waste_vs_mtbf: {e}", file=sys.stderr)
                return 1
    for k in costs.values():
        if not all(k[x] > 0 for x in ("cairn_c", "cairn_r", "sync_c", "sync_r")):
            print(f"waste_vs_mtbf: a measured cost is not positive: {k}", file=sys.stderr)
            return 1
    print(table(costs))
    if args.json:
        Path(args.json).write_text(json.dumps(costs, indent=2) + "\n", encoding="utf-8")
    if out:
        plot(costs, Path(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
