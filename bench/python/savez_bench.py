#!/usr/bin/env python3
"""Checkpoint a dict of numpy arrays: Cairn vs numpy.savez (vs savez + fsync).

Times, for the same arrays and the same directory:

* ``cairn save``: ``client.save(name, version, arrays)``, the time the
  application is blocked (the arrays are copied into Cairn's host cache;
  the write to disk continues in the background);
* ``cairn to local``: from the start of ``save`` until ``client.wait(...,
  "local")`` returns (the version is committed: written, fsynced, renamed);
* ``numpy.savez``: ``np.savez(path, **arrays)`` (into the page cache);
* ``numpy.savez + fsync``: the same, then fsync of the file and the directory
  (what durability costs).

Each repeat runs them in turn (interleaved), after ``os.sync()`` so that one
method's dirty pages do not slow the next. A warm-up comes first: Cairn saves
until its whole host cache has been written once (first-touch page faults of
the cache are a once-per-process cost) and one savez of each kind. Medians
are reported.

    python bench/python/savez_bench.py                      # 16 x 64 MiB = 1 GiB
    python bench/python/savez_bench.py --size 64MiB --repeat 1 --json -   # smoke
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Callable, Dict, List

import numpy as np
import numpy.typing as npt

import cairn

Arrays = Dict[str, npt.NDArray[np.float32]]


def fsync_path(path: str) -> None:
    """fsync a file or a directory."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_arrays(total: int, count: int) -> Arrays:
    """``count`` float32 arrays of ``total / count`` bytes, random contents."""
    rng = np.random.default_rng(0)
    n = total // count // 4
    return {f"layer{i:02d}.weight": rng.random(n, dtype=np.float32) for i in range(count)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--size", default="1GiB", help="total bytes of the arrays (default 1GiB)")
    ap.add_argument("--arrays", type=int, default=16, help="number of arrays (default 16)")
    ap.add_argument("--repeat", type=int, default=3, help="timed rounds (default 3)")
    ap.add_argument("--no-warmup", action="store_true", help="skip the untimed first round")
    ap.add_argument("--dir", default=None, help="directory for both (default: a temp dir)")
    ap.add_argument("--host-cache", default=None, help="Cairn host cache (default: 2 x size)")
    ap.add_argument("--json", default=None, metavar="PATH", help="also write results as JSON ('-': stdout)")
    args = ap.parse_args()

    total = cairn.parse_size(args.size)
    cache = cairn.parse_size(args.host_cache) if args.host_cache else max(2 * total, 64 << 20)
    base = args.dir or tempfile.mkdtemp(prefix="cairn-savez-")
    os.makedirs(base, exist_ok=True)
    scratch = os.path.join(base, "cairn")
    npz_dir = os.path.join(base, "npz")
    os.makedirs(npz_dir, exist_ok=True)

    arrays = make_arrays(total, args.arrays)
    payload = sum(a.nbytes for a in arrays.values())
    times: Dict[str, List[float]] = {
        "cairn save (blocking)": [],
        "cairn save + wait(local)": [],
        "numpy.savez": [],
        "numpy.savez + fsync": [],
    }
    try:
        with cairn.Client(scratch_dir=scratch, host_cache=cache, keep_versions=1) as client:
            version = 0

            def run_cairn(record: bool) -> None:
                nonlocal version
                version += 1
                t0 = time.perf_counter()
                client.save("bench", version, arrays)
                t1 = time.perf_counter()
                client.wait("bench", version, "local")
                t2 = time.perf_counter()
                if record:
                    times["cairn save (blocking)"].append(t1 - t0)
                    times["cairn save + wait(local)"].append(t2 - t0)

            def run_savez(durable: bool) -> Callable[[bool], None]:
                def run(record: bool) -> None:
                    path = os.path.join(npz_dir, "state.npz")
                    if os.path.exists(path):
                        os.unlink(path)
                        os.sync()
                    t0 = time.perf_counter()
                    np.savez(path, **arrays)  # type: ignore[arg-type]
                    if durable:
                        fsync_path(path)
                        fsync_path(npz_dir)
                    t1 = time.perf_counter()
                    if record:
                        times["numpy.savez + fsync" if durable else "numpy.savez"].append(t1 - t0)

                return run

            methods = [run_cairn, run_savez(False), run_savez(True)]
            if not args.no_warmup:
                # Touch the whole host cache once (its first-touch page faults
                # happen once per process), then warm the page cache for savez.
                for _ in range(-(-cache // payload)):
                    run_cairn(False)
                for method in methods[1:]:
                    os.sync()
                    method(False)
            for _ in range(args.repeat):
                for method in methods:
                    os.sync()
                    method(True)

            # Check what was saved: load the last version into fresh arrays.
            check = {k: np.zeros_like(a) for k, a in arrays.items()}
            latest = client.latest("bench")
            if latest is None:
                raise SystemExit("savez_bench: no committed version")
            client.load("bench", latest, check)
            if not all(np.array_equal(check[k], arrays[k]) for k in arrays):
                raise SystemExit("savez_bench: loaded arrays differ from the saved ones")
    finally:
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)

    med = {m: statistics.median(t) for m, t in times.items()}
    blocking = med["cairn save (blocking)"]
    ratios = {
        "savez / cairn blocking": med["numpy.savez"] / blocking,
        "savez+fsync / cairn blocking": med["numpy.savez + fsync"] / blocking,
        "savez+fsync / cairn to local": med["numpy.savez + fsync"] / med["cairn save + wait(local)"],
    }

    print(
        f"{args.arrays} arrays, {cairn.format_size(payload)} in all; host cache "
        f"{cairn.format_size(cache)}; {args.repeat} timed rounds (median)"
        f"{'' if args.no_warmup else ' after a warm-up'}; dir {base}"
    )
    print(f"{'method':<28}{'median s':>10}{'min s':>10}{'max s':>10}{'GB/s':>8}")
    for m, t in times.items():
        print(f"{m:<28}{med[m]:>10.3f}{min(t):>10.3f}{max(t):>10.3f}{payload / med[m] / 1e9:>8.2f}")
    for name, r in ratios.items():
        print(f"ratio {name}: {r:.1f}x")

    if args.json:
        doc = {
            "bytes": payload,
            "arrays": args.arrays,
            "host_cache_bytes": cache,
            "repeat": args.repeat,
            "warmup": not args.no_warmup,
            "seconds": times,
            "median_seconds": med,
            "ratios": ratios,
        }
        text = json.dumps(doc, indent=2)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
