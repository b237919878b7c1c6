#!/usr/bin/env python3
"""Checkpoint a dict of arrays every few iterations and resume after a crash.

A toy "training loop" updates a dict of numpy arrays (its state). Every
``--every`` iterations it saves the state with ``client.save`` (which returns
once the arrays are in Cairn's host cache; the write to disk overlaps the next
iterations). At start it asks ``client.latest`` for the newest checkpoint that
verifies and, if there is one, loads it into the arrays and resumes from there.
Kill it at any moment (even with SIGKILL) and run it again with the same
``--scratch``: it continues where the last durable checkpoint left off, and
its final result is the same as an uninterrupted run's.

    python examples/python/fault_tolerance.py --scratch /tmp/ft --out x.npy
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Dict, Optional

import numpy as np
import numpy.typing as npt

import cairn

NAME = "train"
State = Dict[str, npt.NDArray[Any]]


def make_state(n: int) -> State:
    """The initial state: parameters, a velocity and the iteration counter."""
    rng = np.random.default_rng(42)
    return {
        "params": rng.standard_normal((n, n)),
        "velocity": np.zeros((n, n)),
        "iteration": np.zeros(1, np.int64),  # iterations completed
    }


def update(state: State, i: int) -> None:
    """One deterministic iteration (momentum on a made-up gradient), in place."""
    p, v = state["params"], state["velocity"]
    grad = np.sin(p + 0.01 * i)
    v *= 0.9
    v -= 0.05 * grad
    p += v


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--scratch", required=True, help="Cairn scratch directory (keep it across runs)")
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--every", type=int, default=5, help="checkpoint interval (iterations)")
    ap.add_argument("--size", type=int, default=256, help="arrays are size x size float64")
    ap.add_argument("--delay", type=float, default=0.0, help="extra seconds per iteration")
    ap.add_argument("--out", default=None, help="write the final params here (.npy)")
    args = ap.parse_args()

    state = make_state(args.size)
    with cairn.Client(scratch_dir=args.scratch, host_cache="64MiB", keep_versions=2) as client:
        version = client.latest(NAME)  # None on the first run
        if version is not None:
            client.load(NAME, version, into=state)
        print(f"resumed from version {version if version is not None else 0}", flush=True)

        pending: Optional[int] = None
        for i in range(int(state["iteration"][0]), args.iterations):
            update(state, i)
            state["iteration"][0] = i + 1
            if args.delay:
                time.sleep(args.delay)
            if (i + 1) % args.every == 0:
                # The previous checkpoint has had a whole interval to reach the
                # disk; make sure it did before starting the next one.
                if pending is not None:
                    client.wait(NAME, pending, "local")
                client.save(NAME, i + 1, state)
                pending = i + 1
                print(f"saved version {i + 1}", flush=True)
        if pending is not None:
            client.wait(NAME, pending, "local")
    if args.out:
        np.save(args.out, state["params"])
    print(f"done: {args.iterations} iterations, checksum {float(state['params'].sum()):.12g}")


if __name__ == "__main__":
    main()
