#!/usr/bin/env python3
"""Cost model of Cairn's MPI levels at 1k, 10k and 100k ranks.

docs/mpi_scale.md explains every formula; its tables are this script's output
(`--check docs/mpi_scale.md` fails when they differ, ctest mpi_scale_model_current).

Two kinds of inputs, kept apart on purpose:
  MEASURED  on the development machine (one 2-core VM), named as such;
  MACHINE   a parameter of the target cluster, from its vendor's figures; change
            them with --set name=value to model another machine.
Nothing else enters the numbers. The agreement's round count is not a formula:
it is simulated with Cairn's own algorithm (collective::NewestCommon).
"""

from __future__ import annotations

import argparse
import math
import random
import sys

GiB = 1 << 30

# name: (value, unit, source). One table; the docs' parameter list derives from it.
PARAMS = {
    "manifest_write_s": (0.19e-3, "s", "MEASURED on the development machine (ext4 on virtio): one 4 KiB manifest slot overwritten in place, pwrite + fdatasync, median of 200 (`--measure DIR`)"),
    "hop_latency_s": (2.5e-6, "s", "MACHINE: one recursive-doubling step of an 8-byte MPI_Allreduce between nodes (InfiniBand HDR class)"),
    "nic_bytes_s": (25e9, "B/s", "MACHINE: one node's injection bandwidth, each direction (200 Gb/s)"),
    "memory_bytes_s": (100e9, "B/s", "MACHINE: one node's memory bandwidth available to XOR (read 2, write 1)"),
    "pfs_bytes_s": (2.5e12, "B/s", "MACHINE: the parallel file system's aggregate write bandwidth"),
    "pfs_creates_s": (50e3, "1/s", "MACHINE: file creates per second of its metadata service"),
    "ranks_per_node": (8, "", "MACHINE: ranks per node (e.g. one per GPU)"),
    "rank_bytes": (1 * GiB, "B", "WORKLOAD: bytes each rank checkpoints"),
    "keep_versions": (3, "", "WORKLOAD: retention.keep_versions"),
    "xor_group": (8, "", "WORKLOAD: CAIRN_L3_GROUP, ranks (on distinct nodes) per XOR set"),
    "missing_p": (1e-4, "", "WORKLOAD: chance that one rank lacks one given version at restart (crash mid-flush, damaged block)"),
}
SCALES = (1_000, 10_000, 100_000)


def rounds_newest_common(nranks: int, keep: int, missing_p: float, rng: random.Random) -> tuple:
    """(rounds, version found or -1) of collective::NewestCommon (two 8-byte
    allreduces a round), run on
    a simulated restart: versions 0 .. keep-1 are kept (keep-1 newest); the
    crash caught a uniformly random fraction q of the ranks before they
    committed the newest; and each rank lacks each version independently with
    probability missing_p. Exact and sparse: the ranks that lack an older
    version are drawn (their count binomial, their ids uniform); whether one
    of them also lacks the newest is drawn when the algorithm asks."""
    newest = keep - 1
    q = min(1.0, missing_p + rng.random())
    lacking_newest = _binomial(nranks, q, rng)
    older = {v: set(rng.sample(range(nranks), _binomial(nranks, missing_p, rng))) for v in range(newest)}
    drawn: dict = {}

    def lacks(v: int, r: int) -> bool:
        if v < newest:
            return r in older[v]
        if r not in drawn:
            drawn[r] = rng.random() < q
        return drawn[r]

    def candidate(r: int, bound: int) -> int:  # r's newest version <= bound
        return next((v for v in range(bound, -1, -1) if not lacks(v, r)), -1)

    suspects = set().union(*older.values()) if older else set()
    bound, rounds = newest, 0
    while bound >= 0:
        rounds += 1
        if bound == newest:
            if lacking_newest == 0:
                return rounds, bound
            # Some rank lacks the newest: its candidate is at most newest-1;
            # only ranks that also lack older versions can go lower.
            c = newest - 1
            c = min([c] + [candidate(r, bound) for r in suspects if lacks(newest, r)])
        else:
            c = min([bound] + [candidate(r, bound) for r in older[bound]])
        if c < 0:
            return rounds, -1  # no common version
        if not (older[c] if c < newest else lacking_newest):
            return rounds, c  # every rank has c
        bound = c - 1
    return rounds, -1


def _binomial(n: int, p: float, rng: random.Random) -> int:
    p = min(1.0, max(0.0, p))
    mean = n * p
    if mean > 50:  # normal approximation
        return min(n, max(0, round(rng.gauss(mean, math.sqrt(mean * (1 - p))))))
    k, prod, limit = 0, rng.random(), math.exp(-mean)  # Poisson
    while prod > limit:
        k += 1
        prod *= rng.random()
    return min(n, k)


def model(n: int, P: dict, trials: int, seed: int) -> dict:
    k = P["ranks_per_node"]
    s = P["rank_bytes"]
    g = P["xor_group"]
    nodes = math.ceil(n / k)
    allreduce = math.ceil(math.log2(n)) * P["hop_latency_s"]
    rng = random.Random(seed + n)
    def restarts(p):
        runs = [rounds_newest_common(n, P["keep_versions"], p, rng) for _ in range(trials)]
        return sorted(r for r, _ in runs), sum(v < 0 for _, v in runs) / trials
    rounds, lost = restarts(P["missing_p"])
    # With L2 or L3 a version is missing only when a rank and the copy that
    # would rebuild it are both gone (independent): missing_p squared.
    rounds_red, lost_red = restarts(P["missing_p"] ** 2)
    median_rounds = rounds[len(rounds) // 2]
    node_bytes = k * s
    l2 = node_bytes / P["nic_bytes_s"]
    xor_compute = 3 * node_bytes / P["memory_bytes_s"]  # read own + partial, write partial
    l3 = node_bytes / P["nic_bytes_s"] + xor_compute
    rebuild_ring = node_bytes / P["nic_bytes_s"] + xor_compute
    rebuild_gather = (g - 1) * node_bytes / P["nic_bytes_s"] + xor_compute
    l4_bw = n * s / P["pfs_bytes_s"]
    l4_md = n / P["pfs_creates_s"]
    l4_md_agg = nodes / P["pfs_creates_s"]
    return {
        "ranks": n,
        "nodes": nodes,
        "allreduce_us": allreduce * 1e6,
        "commit_ms": (allreduce + P["manifest_write_s"]) * 1e3,
        "latest_rounds": median_rounds,
        "latest_rounds_max": rounds[-1],
        "latest_ms": rounds[-1] * 2 * allreduce * 1e3,
        "none_common": lost,
        "none_common_red": lost_red,
        "l2_s": l2,
        "l3_s": l3,
        "l3_storage": 1 / (g - 1),
        "rebuild_ring_s": rebuild_ring,
        "rebuild_gather_s": rebuild_gather,
        "l4_bw_s": l4_bw,
        "l4_md_s": l4_md,
        "l4_md_agg_s": l4_md_agg,
        "files_local": n * P["keep_versions"] * 3,  # own + partner + parity per kept version
        "files_pfs": n * P["keep_versions"],
        "files_pfs_agg": nodes * P["keep_versions"],
    }


def fmt_s(x: float) -> str:
    if x < 1e-3:
        return f"{x * 1e6:.0f} us"
    if x < 1:
        return f"{x * 1e3:.1f} ms"
    return f"{x:.2f} s"


def render(P: dict, trials: int, seed: int) -> str:
    rows = [model(n, P, trials, seed) for n in SCALES]
    out = ["<!-- generated by bench/figures/mpi_scale_model.py; do not edit -->", ""]
    out.append("| input | value | source |")
    out.append("|---|---|---|")
    for name, (_, unit, src) in PARAMS.items():
        v = P[name]
        shown = f"{v / GiB:g} GiB" if unit == "B" else (f"{v:g} {unit}".strip())
        out.append(f"| `{name}` | {shown} | {src} |")
    out.append("")
    head = ["ranks"] + [f"{r['ranks']:,}" for r in rows]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---|" * len(head))

    def line(label, key, f):
        out.append("| " + label + " | " + " | ".join(f(r[key]) for r in rows) + " |")

    line("nodes", "nodes", lambda v: f"{v:,}")
    line("8-byte allreduce (log2 N steps)", "allreduce_us", lambda v: f"{v:.1f} us")
    line("global commit record after the last local commit (allreduce + manifest write)", "commit_ms", lambda v: f"{v:.2f} ms")
    line(f"`latest` agreement rounds, median of {trials} simulated restarts", "latest_rounds", str)
    line("`latest` agreement rounds, worst simulated", "latest_rounds_max", str)
    line("`latest` agreement time, worst (2 allreduces per round)", "latest_ms", lambda v: f"{v:.2f} ms")
    line("restarts with no version common to every rank (L1 only)", "none_common", lambda v: f"{v:.0%}")
    line("the same with L2 or L3 (missing_p squared)", "none_common_red", lambda v: f"{v:.0%}")
    line("L2 partner copy per checkpoint (node NIC bound)", "l2_s", fmt_s)
    line("L3 XOR parity per checkpoint (ring + XOR)", "l3_s", fmt_s)
    line("L3 storage per rank, fraction of its file", "l3_storage", lambda v: f"{v:.3f}")
    line("rebuild one lost node, pipelined ring", "rebuild_ring_s", fmt_s)
    line("rebuild one lost node, gather at the replacement", "rebuild_gather_s", fmt_s)
    line("L4 bandwidth time (all ranks' bytes)", "l4_bw_s", fmt_s)
    line("L4 metadata time, one file per rank", "l4_md_s", fmt_s)
    line("L4 metadata time, one file per node (aggregated)", "l4_md_agg_s", fmt_s)
    line("node-local files (own + partner + parity, kept versions)", "files_local", lambda v: f"{v:,}")
    line("persistent files, one per rank", "files_pfs", lambda v: f"{v:,}")
    line("persistent files, aggregated per node", "files_pfs_agg", lambda v: f"{v:,}")
    out.append("")
    return "\n".join(out)


def measure_manifest_write(directory: str, repeat: int = 200) -> float:
    """Median seconds of a durable manifest record (docs/format.md 3.6): one
    4 KiB slot of the already allocated 8 KiB file overwritten in place
    (pwrite + fdatasync), the slots alternating as the records do."""
    import os
    import statistics
    import time
    path = os.path.join(directory, "cairn-model-global")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, bytes(8192))
    os.fsync(fd)
    times = []
    for i in range(repeat):
        slot = (b"cairn-global-slot %d" % i).ljust(4096, b"\0")
        t = time.perf_counter()
        os.pwrite(fd, slot, 4096 * (i % 2))
        os.fdatasync(fd)
        times.append(time.perf_counter() - t)
    os.close(fd)
    os.unlink(path)
    return statistics.median(times)


BEGIN, END = "<!-- model:begin -->", "<!-- model:end -->"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override an input")
    ap.add_argument("--trials", type=int, default=201)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--check", metavar="DOC", help="fail unless DOC's generated block equals the output")
    ap.add_argument("--update", metavar="DOC", help="rewrite DOC's generated block")
    ap.add_argument("--measure", metavar="DIR", help="measure manifest_write_s in DIR and print it")
    a = ap.parse_args()
    if a.measure:
        print(f"manifest_write_s={measure_manifest_write(a.measure):.3g}")
        return 0
    P = {k: v[0] for k, v in PARAMS.items()}
    for item in a.set:
        name, _, value = item.partition("=")
        if name not in P:
            ap.error(f"--set {item}: no input '{name}' (inputs: {', '.join(P)})")
        try:
            P[name] = type(P[name])(float(value))
        except ValueError:
            ap.error(f"--set {item}: '{value}' is not a number")
    text = render(P, a.trials, a.seed)
    doc = a.check or a.update
    if not doc:
        print(text)
        return 0
    with open(doc, encoding="utf-8") as f:
        body = f.read()
    if BEGIN not in body or END not in body:
        print(f"{doc}: no '{BEGIN}' ... '{END}' block", file=sys.stderr)
        return 1
    head, rest = body.split(BEGIN, 1)
    old, tail = rest.split(END, 1)
    if a.check:
        if old.strip() != text.strip():
            print(f"{doc}: the model's tables are out of date; run bench/figures/mpi_scale_model.py --update {doc}", file=sys.stderr)
            return 1
        return 0
    with open(doc, "w", encoding="utf-8") as f:
        f.write(head + BEGIN + "\n" + text + END + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
