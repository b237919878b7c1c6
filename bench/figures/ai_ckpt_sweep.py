#!/usr/bin/env python3
"""The closing figures: `cairn-bench ai-ckpt` over copy-on-write buffer sizes.

For each --pattern and each COW buffer size (--cows, fractions of the
protected bytes: 0, 1, 2.5, 5 and 10% by default) runs one `cairn-bench
ai-ckpt` (every mode in one process, interleaved round by round, medians of
--repeat rounds: none, sync, copy, zero_copy = address order, zero_copy_learned)
and draws the slides' two figures per pattern (AI-Ckpt, HPDC'13):

  docs/img/ai-ckpt-<pattern>-increase.png   runtime increase over `none` (s)
                                            against the COW size, per mode
  docs/img/ai-ckpt-<pattern>-reduction.png  overhead reduction vs sync
                                            (1 - increase / sync's increase)

and prints a Markdown table per pattern (increase per mode, reduction vs sync,
learned vs address, RED/ORANGE, extra memory), also written to --out when
given. `sync` and `copy` do not depend on the COW size; they are measured in
every run anyway, so each point compares modes measured side by side.

The memory comes from cairn_alloc (2 MiB-aligned, transparent huge pages
advised: set /sys/kernel/mm/transparent_hugepage/enabled to madvise or
always). Run it on a quiet machine; the 1 GiB default takes about an hour:

  bench/figures/ai_ckpt_sweep.py --bench build/bin/cairn-bench --size 1GiB --repeat 3 \\
      --json-dir /tmp/ai-ckpt --out docs/results/<date>-ai-ckpt-sweeps.md

--quick: 2 MiB, one pattern, two COW sizes, one round, plots to a temporary
directory (ctest ai_ckpt_sweep_smoke: the script runs end to end). Needs
matplotlib for the plots (pip install matplotlib); without it the tables are
still printed. Exit: 0, or 1 when a run fails.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

MODES = ["sync", "copy", "zero_copy", "zero_copy_learned"]
LABELS = {"sync": "sync (write + fsync)", "copy": "copy (Cairn cache)",
          "zero_copy": "zero-copy, address order", "zero_copy_learned": "zero-copy, learned order"}


def run(args, pattern: str, cow: float, json_dir: Path) -> dict:
    path = json_dir / f"ai-ckpt-{pattern}-cow{cow:g}.json"
    if args.reuse and path.exists():  # a sweep resumed: this run is done
        with open(path) as f:
            return json.load(f)["ai_ckpt"]
    # "irregular-reversed": the irregular pattern moved from the reversed order (--base).
    base = pattern.split("-", 1)[1] if pattern.startswith("irregular-") else None
    cmd = [args.bench, "ai-ckpt", "--size", args.size, "--pattern", pattern.split("-", 1)[0],
           "--cow", f"{cow:g}"] + (["--base", base] if base else []) + [
           "--iterations", str(args.iterations), "--every", str(args.every),
           "--compute-ms", f"{args.compute_ms:g}", "--moved", f"{args.moved:g}",
           "--repeat", str(args.repeat), "--quiet", "--json", str(path)]
    if args.dir:
        cmd += ["--dir", args.dir]
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(path) as f:
        return json.load(f)["ai_ckpt"]


def reduction(doc: dict, mode: str):
    """1 - increase(mode) / increase(sync): the slides' "overhead reduction vs sync"."""
    inc = doc["runtime_increase_s"]
    return 1 - inc[mode] / inc["sync"] if inc.get("sync", 0) > 0 else None


def fmt(v, spec=".2f"):
    return "-" if v is None else format(v, spec)


def table(pattern: str, cows: list, docs: dict, args) -> str:
    d0 = docs[cows[0]]
    lines = [f"### `{pattern}`: {args.size}, every {args.every} of {args.iterations} iterations, "
             f"{args.compute_ms:g} ms compute per iteration, medians of {args.repeat}",
             "",
             f"`none` ran {d0['runtime_s']['none']:.2f} s. Runtime increase over `none` (s); "
             "reduction vs sync = 1 - increase / sync's; learned/address = the ratio of the two "
             "zero-copy increases; RED/ORANGE per run (address | learned); extra memory of the "
             "learned mode (COW + bookkeeping + staging cache).",
             "",
             "| COW | sync | copy | zero_copy | zero_copy_learned | reduction vs sync (address, learned) "
             "| learned/address | RED | ORANGE | extra memory (MiB) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for cow in cows:
        d = docs[cow]
        inc = d["runtime_increase_s"]
        zc, zl = inc.get("zero_copy"), inc.get("zero_copy_learned")
        ratio = zl / zc if zc and zc > 0 else None
        red, orange = d.get("red", {}), d.get("orange", {})
        mem = d.get("extra_memory_bytes", {}).get("zero_copy_learned", 0) / (1 << 20)
        lines.append(f"| {100 * cow:g}% | {fmt(inc.get('sync'))} | {fmt(inc.get('copy'))} | {fmt(zc)} | {fmt(zl)} "
                     f"| {fmt(reduction(d, 'zero_copy'), '.0%')}, {fmt(reduction(d, 'zero_copy_learned'), '.0%')} "
                     f"| {fmt(ratio)} | {red.get('zero_copy', 0):.0f} \\| {red.get('zero_copy_learned', 0):.0f} "
                     f"| {orange.get('zero_copy', 0):.0f} \\| {orange.get('zero_copy_learned', 0):.0f} | {mem:.1f} |")
    return "\n".join(lines) + "\n"


def plot(img: Path, pattern: str, cows: list, docs: dict, size: str) -> list:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("ai_ckpt_sweep: matplotlib missing (pip install matplotlib): no plot", file=sys.stderr)
        return []
    xs = [100 * c for c in cows]
    out = []
    for kind in ("increase", "reduction"):
        fig, ax = plt.subplots(figsize=(6.4, 4))
        for m in MODES if kind == "increase" else ["copy", "zero_copy", "zero_copy_learned"]:
            ys = [docs[c]["runtime_increase_s"].get(m) if kind == "increase" else reduction(docs[c], m)
                  for c in cows]
            ys = [None if y is None else (100 * y if kind == "reduction" else y) for y in ys]
            ax.plot(xs, ys, marker="o", label=LABELS[m], linewidth=2.5 if m == "zero_copy_learned" else 1.2)
        ax.set_xlabel(f"copy-on-write buffer (% of the {size} protected)")
        if kind == "increase":
            ax.set_ylabel("increase in runtime over no checkpoint (s)")
            ax.set_ylim(bottom=0)
        else:
            ax.set_ylabel("overhead reduction vs sync (%)")
            ax.axhline(0, color="gray", linewidth=0.8)
        ax.set_title(f"AI-Ckpt, {pattern} pattern")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = img / f"ai-ckpt-{pattern}-{kind}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append(path)
    return out


def main(argv: list) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default="build/bin/cairn-bench")
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--patterns", default="sequential,reversed,irregular,random",
                    help="comma-separated; irregular-reversed: irregular moved from the reversed order")
    ap.add_argument("--cows", default="0,0.01,0.025,0.05,0.1", help="COW buffer sizes, fractions of --size")
    ap.add_argument("--iterations", type=int, default=8)
    ap.add_argument("--every", type=int, default=2)
    ap.add_argument("--compute-ms", type=float, default=1500,
                    help="per iteration; an epoch (--every iterations) should be >= 2x the time to flush --size")
    ap.add_argument("--moved", type=float, default=0.1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=None, help="checkpoint directory (default: a temporary one per run)")
    ap.add_argument("--json-dir", default=None, help="keep each run's JSON here")
    ap.add_argument("--img", default=None, help="plot directory (default: docs/img, a temporary one with --quick)")
    ap.add_argument("--out", default=None, help="also write the tables to this Markdown file")
    ap.add_argument("--reuse", action="store_true",
                    help="take a run's JSON from --json-dir when it is there (resume a sweep)")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.size, args.patterns, args.cows = "2MiB", "reversed", "0,0.05"
        args.iterations, args.every, args.compute_ms, args.repeat = 4, 2, 20, 1
    patterns = args.patterns.split(",")
    cows = [float(c) for c in args.cows.split(",")]
    with tempfile.TemporaryDirectory(prefix="cairn-ai-ckpt-") as tmp:
        json_dir = Path(args.json_dir or tmp)
        json_dir.mkdir(parents=True, exist_ok=True)
        img = Path(args.img or (Path(tmp) / "img" if args.quick else "docs/img"))
        img.mkdir(parents=True, exist_ok=True)
        text = []
        try:
            for pattern in patterns:
                docs = {cow: run(args, pattern, cow, json_dir) for cow in cows}
                t = table(pattern, cows, docs, args)
                for png in plot(img, pattern, cows, docs, args.size):
                    t += f"\n![{png.stem}]({os.path.relpath(png, Path(args.out).parent) if args.out else png})\n"
                print("\n" + t)
                text.append(t)
        except subprocess.CalledProcessError as e:
            print(f"ai_ckpt_sweep: {e}", file=sys.stderr)
            return 1
    if args.out:
        Path(args.out).write_text("## AI-Ckpt sweep (bench/figures/ai_ckpt_sweep.py)\n\n" + "\n".join(text), encoding="utf-8")
        print(f"ai_ckpt_sweep: wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
