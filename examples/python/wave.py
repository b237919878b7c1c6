#!/usr/bin/env python3
"""A tiny 2-D wave simulation that uses a Cairn history the way adjoint codes do.

A shot is modelled in a two-layer velocity model and recorded along a line of
receivers at the surface. The forward pass propagates the source wavefield in
the migration model (no reflector) and pushes every snapshot into
``client.history("wave")``. The backward pass back-propagates the recorded
reflections in reverse time and pops the source snapshots in reverse order,
cross-correlating the two into an image (the imaging condition of reverse time
migration): the image is strongest at the reflector's depth. The host cache is
much smaller than the snapshot set, so snapshots are evicted to the scratch
directory during the forward pass and prefetched back ahead of the pops.

    python examples/python/wave.py                 # 120 x 200 grid, 700 steps
    python examples/python/wave.py --steps 2000 --host-cache 64MiB
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
import numpy.typing as npt

import cairn

Field = npt.NDArray[np.float32]


def ricker(t: npt.NDArray[np.float64], f0: float) -> npt.NDArray[np.float64]:
    """Ricker wavelet of peak frequency f0 (Hz), delayed by 1.2 / f0."""
    a = (np.pi * f0 * (t - 1.2 / f0)) ** 2
    return (1.0 - 2.0 * a) * np.exp(-a)


def sponge(nz: int, nx: int, width: int) -> Field:
    """Damping factors (< 1 near the sides and bottom) that absorb outgoing waves."""
    def ramp(n: int, top: bool) -> npt.NDArray[np.float64]:
        d = np.minimum(np.arange(n), np.arange(n)[::-1]).astype(np.float64)
        if not top:  # the surface (row 0) reflects, like a free surface
            d[: n // 2] = width
        return np.exp(-((0.015 * np.maximum(width - d, 0)) ** 2))

    return np.outer(ramp(nz, top=False), ramp(nx, top=True)).astype(np.float32)


def step(prev: Field, cur: Field, c2: Field, damp: Field) -> Field:
    """One leapfrog step of u_tt = c^2 laplacian(u) (second order in space and time)."""
    lap = np.zeros_like(cur)
    lap[1:-1, 1:-1] = (
        cur[2:, 1:-1] + cur[:-2, 1:-1] + cur[1:-1, 2:] + cur[1:-1, :-2] - 4.0 * cur[1:-1, 1:-1]
    )
    nxt = (2.0 * cur - prev + c2 * lap) * damp
    return nxt.astype(np.float32, copy=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--nz", type=int, default=120, help="grid rows (depth)")
    ap.add_argument("--nx", type=int, default=200, help="grid columns")
    ap.add_argument("--steps", type=int, default=700, help="time steps")
    ap.add_argument("--host-cache", default="8MiB", help="Cairn host cache size")
    ap.add_argument("--scratch", default=None, help="scratch directory (default: a temp dir)")
    args = ap.parse_args()

    nz, nx, nt = args.nz, args.nx, args.steps
    dx, vmin, vmax = 10.0, 1500.0, 2500.0
    interface = int(nz * 0.45)  # depth (in cells) of the reflector
    vel = np.full((nz, nx), vmin, np.float32)
    vel[interface:] = vmax
    dt = 0.4 * dx / vmax
    c2 = ((vel * dt / dx) ** 2).astype(np.float32)
    smooth = np.full_like(c2, (vmin * dt / dx) ** 2)  # migration model: no reflector
    damp = sponge(nz, nx, 20)
    wavelet = ricker(np.arange(nt) * dt, 15.0).astype(np.float32)
    src = (2, nx // 2)
    rec_row = 2

    with tempfile.TemporaryDirectory(prefix="cairn-wave-") as tmp, cairn.Client(
        scratch_dir=args.scratch or tmp,
        host_cache=args.host_cache,
        block_size="64KiB",
    ) as client:
        t0 = time.perf_counter()
        # The shot: record the surface in the true model (with the reflector).
        data = np.zeros((nt, nx), np.float32)
        prev, cur = np.zeros((nz, nx), np.float32), np.zeros((nz, nx), np.float32)
        for t in range(nt):
            prev, cur = cur, step(prev, cur, c2, damp)
            cur[src] += wavelet[t]
            data[t] = cur[rec_row]

        with client.history("wave") as history:
            # Forward: the source wavefield in the migration model; push every
            # snapshot. What it records at the surface is the direct wave.
            direct = np.zeros((nt, nx), np.float32)
            sums = np.zeros(nt)
            prev, cur = np.zeros((nz, nx), np.float32), np.zeros((nz, nx), np.float32)
            for t in range(nt):
                prev, cur = cur, step(prev, cur, smooth, damp)
                cur[src] += wavelet[t]
                direct[t] = cur[rec_row]
                history.push(t, cur)
                sums[t] = float(cur.sum(dtype=np.float64))
            t1 = time.perf_counter()

            # Backward: back-propagate the reflections (data minus direct
            # wave) in reverse time, pop the source snapshots in reverse order
            # and cross-correlate them into the image.
            residual = data - direct
            image = np.zeros((nz, nx), np.float64)
            snap = np.empty((nz, nx), np.float32)
            prev, cur = np.zeros((nz, nx), np.float32), np.zeros((nz, nx), np.float32)
            intact = 0
            for t in reversed(range(nt)):
                prev, cur = cur, step(prev, cur, smooth, damp)
                cur[rec_row] += residual[t]
                history.pop(t, out=snap)
                intact += float(snap.sum(dtype=np.float64)) == sums[t]
                image += snap * cur
        t2 = time.perf_counter()
        stats = client.stats()

    # Depth of the strongest image, below the source's near field.
    energy = np.abs(image).sum(axis=1)
    depth = int(np.argmax(energy[10:])) + 10
    mib = nz * nx * 4 * nt / 2**20
    print(f"grid {nz} x {nx}, {nt} steps, {mib:.1f} MiB of snapshots, host cache {args.host_cache}")
    print(f"forward {t1 - t0:.2f} s, backward {t2 - t1:.2f} s")
    print(
        f"pops: {stats.cache_hits} from the cache, {stats.cache_misses} from files, "
        f"{stats.prefetch.ops} prefetched, {stats.evictions} blocks evicted"
    )
    print(f"strongest image at depth {depth} cells; reflector at {interface} cells")
    print(f"snapshots intact: {intact} of {nt}, popped in reverse order")
    if intact != nt:
        raise SystemExit("some snapshots came back different")


if __name__ == "__main__":
    main()
