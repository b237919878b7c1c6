#!/usr/bin/env python3
"""The figures: what `cairn-bench restart` shows for changed data.

Runs cairn-bench (Cairn only, --mode async) in interleaved rounds, one trial
per configuration per round, and prints the medians over the rounds and the
issue's ratios. Every run uses --settle on (each version is on the local tier
before the next interval, so each can be layered on the one before it
whatever the disk's speed; the wait is not timed).

  targets  full vs pages (5% random pages) vs hash (10% in 64 KiB runs):
           per-checkpoint blocking of versions 1.. (version 0 is full in every
           mode), bytes written / bytes changed, the tracking overhead on the
           compute loop (the pages run's --track-loop)
  chain    cold restore (new process, page cache dropped) of a pages chain tip
           at depth 1, 5 and max_layers vs a full version of the same size
  table1   pages at FTI's Table I change rates (3.4%, 10.4%, 29.8%)
  all      the three

  bench/figures/changes_figures.py [--bench build/bin/cairn-bench] [--size 1GiB]
      [--repeat 3] [--interval-ms 200] [--dir DIR] [--json-dir DIR] [--quick]
      {targets,chain,table1,all}

--quick: 8 MiB, 1 round, short intervals (checks that the script runs).
Each configuration's JSON documents are kept under --json-dir when given.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

TABLE1 = [0.034, 0.104, 0.298]  # FTI (CCGrid'20) Table I change rates
DEPTHS = [1, 5, 10]             # the last one is --max-layers


def run_bench(args, extra, tag, json_dir):
    fd, path = tempfile.mkstemp(prefix="cairn-changes-", suffix=".json", dir=json_dir)
    os.close(fd)
    cmd = [args.bench, "restart", "--mode", "async", "--no-warmup", "--repeat", "1",
           "--settle", "on", "--size", args.size, "--interval-ms", str(args.interval_ms),
           "--limits-size", args.limits_size, "--quiet", "--json", path] + extra
    if args.dir:
        cmd += ["--dir", args.dir]
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(path) as f:
        doc = json.load(f)
    if json_dir is None:
        os.unlink(path)
    else:
        os.replace(path, os.path.join(json_dir, tag + ".json"))
    return doc


def get(doc, path):
    for key in path.split("."):
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    return doc


def rounds(args, configs):
    """configs: [(name, extra args)]; returns {name: [doc per round]}, interleaved."""
    out = {name: [] for name, _ in configs}
    for r in range(args.repeat):
        for name, extra in configs:
            out[name].append(run_bench(args, extra, "%s.r%d" % (name, r + 1), args.json_dir))
    return out


def med(docs, path):
    v = [get(d, path) for d in docs]
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt(x, spec=".4f"):
    return "-" if x is None else format(x, spec)


def targets(args):
    configs = [
        ("full", ["--changes", "full", "--count", "4"]),
        ("pages-5pct-random", ["--changes", "pages", "--change-fraction", "0.05",
                               "--change-pattern", "random-pages", "--count", "4",
                               "--track-loop-ms", str(args.track_loop_ms)]),
        ("hash-10pct-runs", ["--changes", "hash", "--change-fraction", "0.1",
                             "--change-pattern", "runs", "--count", "4", "--track-loop", "off"]),
    ]
    res = rounds(args, configs)
    full_block = med(res["full"], "changes.checkpoint_blocking_after_first_s")
    print("\n== targets (%s, %d rounds, medians) ==" % (args.size, args.repeat))
    print("%-18s %12s %12s %10s %14s %14s %9s %9s" % (
        "config", "block_v1+_s", "block_med_s", "to_full", "changed_B", "written_B",
        "w/c", "w/c v1+"))
    for name, _ in configs:
        docs = res[name]
        b = med(docs, "changes.checkpoint_blocking_after_first_s")
        print("%-18s %12s %12s %10s %14s %14s %9s %9s" % (
            name, fmt(b), fmt(med(docs, "restart.checkpoint_blocking_s")),
            fmt(ratio(b, full_block), ".3f"),
            fmt(med(docs, "changes.bytes_changed"), ".0f"),
            fmt(med(docs, "changes.bytes_written"), ".0f"),
            fmt(med(docs, "changes.written_to_changed"), ".3f"),
            fmt(med(docs, "changes.written_to_changed_after_first"), ".3f")))
    p = res["pages-5pct-random"]
    print("tracking (pages run's compute loop, %s ms of compute per interval): untracked %s s, "
          "tracked %s s, overhead %s (target <= 0.05); tracker %s" % (
              args.track_loop_ms, fmt(med(p, "tracking.untracked_s")),
              fmt(med(p, "tracking.tracked_s")), fmt(med(p, "tracking.overhead")),
              get(p[0], "tracking.tracker") if p else "-"))
    print("targets: pages blocking <= 0.1x full; pages written <= 1.05x changed (+ metadata < 1%%: "
          "pages metadata fraction %s); hash blocking <= 0.5x full" %
          fmt(med(p, "changes.metadata_fraction"), ".5f"))


def chain(args):
    configs = [("full", ["--changes", "full", "--count", "2", "--track-loop", "off"])]
    for d in DEPTHS:
        configs.append(("pages-depth%d" % d, [
            "--changes", "pages", "--change-fraction", "0.05", "--count", str(d + 1),
            "--max-layers", str(DEPTHS[-1]), "--track-loop", "off"]))
    res = rounds(args, configs)
    full = med(res["full"], "restart.cold_restore_s")
    full_call = med(res["full"], "restart.cold_restore_call_s")
    print("\n== chain: cold restore (%s, %d rounds, medians) ==" % (args.size, args.repeat))
    print("%-14s %6s %14s %10s %16s %10s" % ("config", "depth", "cold_restore_s", "to_full",
                                            "restore_call_s", "to_full"))
    for name, _ in configs:
        docs = res[name]
        c = med(docs, "restart.cold_restore_s")
        cc = med(docs, "restart.cold_restore_call_s")
        print("%-14s %6s %14s %10s %16s %10s" % (
            name, fmt(med(docs, "changes.tip_depth"), ".0f"), fmt(c), fmt(ratio(c, full), ".3f"),
            fmt(cc), fmt(ratio(cc, full_call), ".3f")))
    print("target: depth-%d tip <= 1.5x full (cold_restore_s: spawn -> restored; "
          "restore_call_s: the Restore call alone)" % DEPTHS[-1])


def table1(args):
    configs = [("pages-%.1fpct" % (f * 100), ["--changes", "pages", "--change-fraction", str(f),
                                              "--count", "4", "--track-loop", "off"])
               for f in TABLE1]
    configs.insert(0, ("full", ["--changes", "full", "--count", "4"]))
    res = rounds(args, configs)
    full_block = med(res["full"], "changes.checkpoint_blocking_after_first_s")
    print("\n== FTI Table I change rates (%s, %d rounds, medians) ==" % (args.size, args.repeat))
    print("%-14s %12s %10s %9s" % ("config", "block_v1+_s", "to_full", "w/c v1+"))
    for name, _ in configs:
        docs = res[name]
        b = med(docs, "changes.checkpoint_blocking_after_first_s")
        print("%-14s %12s %10s %9s" % (name, fmt(b), fmt(ratio(b, full_block), ".3f"),
                                       fmt(med(docs, "changes.written_to_changed_after_first"),
                                           ".3f")))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["targets", "chain", "table1", "all"])
    ap.add_argument("--bench", default=os.path.join(here, "..", "..", "build", "bin", "cairn-bench"))
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--interval-ms", type=float, default=200)
    ap.add_argument("--track-loop-ms", type=float, default=200)
    ap.add_argument("--dir", default="")
    # The disk limits are not part of these figures: a small probe (the
    # default probe is the run's bytes, up to 1 GiB, per invocation).
    ap.add_argument("--limits-size", default="16MiB")
    ap.add_argument("--json-dir", default=None)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.size, args.repeat, args.interval_ms, args.track_loop_ms = "8MiB", 1, 5, 5
    if args.json_dir:
        os.makedirs(args.json_dir, exist_ok=True)
    for what, fn in (("targets", targets), ("chain", chain), ("table1", table1)):
        if args.what in (what, "all"):
            fn(args)


if __name__ == "__main__":
    main()
