#!/usr/bin/env python3
"""torch.distributed.checkpoint with cairn.torch.Writer vs DCP's FileSystemWriter.

A 12-layer transformer built here (no downloads) with its Adam state, about
``--size`` GiB in all, on ``--ranks`` processes that meet over gloo (a
FileStore, no port). Page caches are dropped before every launch. Sides run
interleaved, one launch each per round:

* ``save``: ``--saves`` ``dcp.async_save`` calls of the same state (changed a
  little between saves), each waited for before the next. Per save: the time
  the call blocks (``blocking_s``) and until its future is done, the step
  durable (``durable_s``); the job's figure is the slowest rank's, the median
  over saves. ``peak_extra_bytes``: the largest rank's peak RSS during its
  saves minus its RSS before the first (Cairn's host cache is counted: it is
  allocated then and kept).
* ``load``: a new launch, ``dcp.load`` of the newest step into a model built
  from another seed, checked equal to what was saved (``load_s``: slowest
  rank; ``--load-rounds`` interleaved launches per side after the saves,
  median: one cold read of a virtual disk varies by a second between launches).
* ``reshard`` (cairn): the parameters as DTensors sharded over 4 ranks, saved,
  then loaded on 2 ranks and checked (``reshard.load_s``).
* ``train``: ``--train-steps`` training steps, an ``async_save`` every
  ``--every`` steps (none / fs / cairn), ``--train-rounds`` interleaved
  rounds; ``train.<side>_s`` (median) and the overheads over no saves.

    python bench/python/dcp_bench.py --size 1.5 --ranks 2 --json dcp.json
    python bench/python/dcp_bench.py --size 0.05 --ranks 2 --saves 2 --train-steps 4 --json -   # smoke
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from typing import Any, Dict, List, Optional, Tuple

GIB = 1 << 30


def drop_caches() -> bool:
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


# -- one rank -----------------------------------------------------------------


def rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class PeakRss:
    """The process's peak RSS, sampled every 2 ms while running."""

    def __init__(self) -> None:
        self.peak = rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, rss())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.peak, rss())


def build(size_gib: float, seed: int) -> Tuple[Any, Any]:
    import torch

    # 12 layers of 12 d^2 parameters; fp32 with Adam's two moments: 3 x 4 bytes each.
    d = max(64, int((size_gib * GIB / (12 * 12 * 12)) ** 0.5) // 64 * 64)
    torch.manual_seed(seed)
    layer = torch.nn.TransformerEncoderLayer(d, 8, 4 * d, dropout=0.0)
    model = torch.nn.TransformerEncoder(layer, 12, enable_nested_tensor=False)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    step(model, opt, 0)
    return model, opt


def step(model: Any, opt: Any, i: int) -> None:
    import torch

    d = model.layers[0].linear1.in_features
    x = torch.randn(16, 2, d, generator=torch.Generator().manual_seed(i))
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    opt.step()


def state(model: Any, opt: Any) -> Dict[str, Any]:
    from torch.distributed.checkpoint.state_dict import get_state_dict

    m, o = get_state_dict(model, opt)
    return {"model": m, "optim": o}


def digest(model: Any) -> float:
    return float(sum(p.double().sum().item() for p in model.parameters()))


def writer(side: str, root: str, i: int) -> Tuple[Any, str]:
    import cairn.torch
    from torch.distributed.checkpoint.filesystem import FileSystemWriter

    if side == "cairn":
        return cairn.torch.Writer(root), str(i)
    path = os.path.join(root, f"step-{i}")
    return FileSystemWriter(path), path


def reader(side: str, root: str, i: int) -> Tuple[Any, str]:
    import cairn.torch
    from torch.distributed.checkpoint.filesystem import FileSystemReader

    if side == "cairn":
        return cairn.torch.Reader(root), str(i)
    path = os.path.join(root, f"step-{i}")
    return FileSystemReader(path), path


def rank_main(a: argparse.Namespace) -> Dict[str, Any]:
    import torch
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict_loader import load
    from torch.distributed.checkpoint.state_dict_saver import async_save

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{a.init}", rank=a.rank, world_size=a.world)
    root = os.path.join(a.dir, a.side)
    out: Dict[str, Any] = {}
    if a.role == "save":
        model, opt = build(a.size, 1)
        sd = state(model, opt)
        before = rss()
        peak = PeakRss()
        out["blocking_s"], out["durable_s"] = [], []
        for i in range(1, a.saves + 1):
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(1e-3)
            w, cid = writer(a.side, root, i)
            dist.barrier()
            t0 = time.perf_counter()
            fut = async_save(sd, storage_writer=w, checkpoint_id=cid)
            t1 = time.perf_counter()
            assert isinstance(fut, Future)
            fut.result()
            out["blocking_s"].append(t1 - t0)
            out["durable_s"].append(time.perf_counter() - t0)
        out["peak_extra_bytes"] = peak.stop() - before
        out["digest"] = digest(model)
    elif a.role == "load":
        model, opt = build(a.size, 2)
        sd = state(model, opt)
        r, cid = reader(a.side, root, a.saves)
        dist.barrier()
        t0 = time.perf_counter()
        load(sd, storage_reader=r, checkpoint_id=cid)
        out["load_s"] = time.perf_counter() - t0
        from torch.distributed.checkpoint.state_dict import set_state_dict

        set_state_dict(model, opt, model_state_dict=sd["model"], optim_state_dict=sd["optim"])
        out["digest"] = digest(model)
    elif a.role in ("reshard-save", "reshard-load"):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Shard, distribute_tensor

        model, _ = build(a.size, 1 if a.role == "reshard-save" else 3)
        mesh = init_device_mesh("cpu", (a.world,))
        sd = {k: distribute_tensor(v.detach(), mesh, [Shard(0)]) for k, v in model.state_dict().items()}
        import cairn.torch

        if a.role == "reshard-save":
            from torch.distributed.checkpoint.state_dict_saver import save

            save(sd, storage_writer=cairn.torch.Writer(root, name="reshard"), checkpoint_id="1")
        else:
            dist.barrier()
            t0 = time.perf_counter()
            load(sd, storage_reader=cairn.torch.Reader(root, name="reshard"), checkpoint_id="1")
            out["load_s"] = time.perf_counter() - t0
            ref, _ = build(a.size, 1)
            out["correct"] = all(torch.equal(sd[k].full_tensor(), v) for k, v in ref.state_dict().items())
    elif a.role == "train":
        model, opt = build(a.size, 1)
        pending: Optional[Future[Any]] = None
        dist.barrier()
        t0 = time.perf_counter()
        for i in range(1, a.train_steps + 1):
            step(model, opt, i)
            if a.side != "none" and i % a.every == 0:
                if pending is not None:
                    pending.result()
                w, cid = writer(a.side, root, i)
                fut = async_save(state(model, opt), storage_writer=w, checkpoint_id=cid)
                assert isinstance(fut, Future)
                pending = fut
        if pending is not None:
            pending.result()
        dist.barrier()
        out["train_s"] = time.perf_counter() - t0
    dist.barrier()
    dist.destroy_process_group()
    return out


# -- the launcher ---------------------------------------------------------------


def launch(a: argparse.Namespace, role: str, side: str, world: int) -> List[Dict[str, Any]]:
    dropped = drop_caches()
    init = os.path.join(a.dir, f"init-{role}-{side}-{time.monotonic_ns()}")
    base = [sys.executable, __file__, "--rank-of", role, side, init, str(world),
            "--size", str(a.size), "--saves", str(a.saves), "--dir", a.dir,
            "--train-steps", str(a.train_steps), "--every", str(a.every)]  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [subprocess.Popen(base + ["--rank", str(r)], stdout=subprocess.PIPE, text=True, env=env)
             for r in range(world)]  # fmt: skip
    results = []
    for p in procs:
        out, _ = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"dcp_bench: {role} {side} rank failed ({p.returncode})")
        line = [x for x in out.splitlines() if x.startswith("RESULT ")][-1]
        results.append(dict(json.loads(line[7:]), caches_dropped=dropped))
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=float, default=1.5, help="GiB of parameters + Adam state")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--saves", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--load-rounds", type=int, default=3,
                    help="interleaved cold loads per side (fs, cairn) after each round's saves, median")
    ap.add_argument("--train-rounds", type=int, default=5,
                    help="interleaved training trials per side (none, fs, cairn), median")
    ap.add_argument("--train-steps", type=int, default=12)
    ap.add_argument("--every", type=int, default=4)
    ap.add_argument("--dir", default="", help="checkpoint directory (default: a new one in /var/tmp)")
    ap.add_argument("--json", default="", help="write the results here ('-': stdout)")
    ap.add_argument("--rank-of", nargs=4, metavar=("ROLE", "SIDE", "INIT", "WORLD"), help=argparse.SUPPRESS)
    ap.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rank_of:
        a.role, a.side, a.init, a.world = a.rank_of[0], a.rank_of[1], a.rank_of[2], int(a.rank_of[3])
        print("RESULT " + json.dumps(rank_main(a)), flush=True)
        return
    own = not a.dir
    a.dir = a.dir or tempfile.mkdtemp(prefix="dcp-bench-", dir="/var/tmp")
    os.makedirs(a.dir, exist_ok=True)
    try:
        report = run(a)
    finally:
        if own:
            shutil.rmtree(a.dir, ignore_errors=True)
    text = json.dumps(report, indent=2)
    if a.json == "-" or not a.json:
        print(text)
    if a.json and a.json != "-":
        with open(a.json, "w") as f:
            f.write(text + "\n")


def run(a: argparse.Namespace) -> Dict[str, Any]:
    sides = ("fs", "cairn")
    raw: Dict[str, Dict[str, List[Any]]] = {s: {"save": [], "load": [], "train": []} for s in sides + ("none",)}
    for _ in range(a.rounds):
        for side in sides:
            shutil.rmtree(os.path.join(a.dir, side), ignore_errors=True)
            raw[side]["save"].append(launch(a, "save", side, a.ranks))
        for _ in range(a.load_rounds):
            for side in sides:
                raw[side]["load"].append((len(raw[side]["save"]) - 1, launch(a, "load", side, a.ranks)))
    report: Dict[str, Any] = {"params": {"size_gib": a.size, "ranks": a.ranks, "saves": a.saves,
                                         "rounds": a.rounds, "load_rounds": a.load_rounds,
                                         "train_rounds": a.train_rounds}}  # fmt: skip
    for side in sides:
        saves = raw[side]["save"]
        blocking = [max(rank["blocking_s"][i] for rank in job) for job in saves for i in range(a.saves)]
        durable = [max(rank["durable_s"][i] for rank in job) for job in saves for i in range(a.saves)]
        loads = [max(rank["load_s"] for rank in job) for _, job in raw[side]["load"]]
        report[f"{side}.blocking_s"] = statistics.median(blocking)
        report[f"{side}.durable_s"] = statistics.median(durable)
        report[f"{side}.load_s"] = statistics.median(loads)
        report[f"{side}.peak_extra_bytes"] = max(rank["peak_extra_bytes"] for job in saves for rank in job)
        report[f"{side}.load_correct"] = all(
            abs(l_["digest"] - s_["digest"]) == 0.0
            for i, lj in raw[side]["load"] for l_, s_ in zip(lj, saves[i])
        )  # fmt: skip
        report[f"{side}.all_blocking_s"] = blocking
        report[f"{side}.all_load_s"] = loads
    report["blocking_ratio_fs_over_cairn"] = report["fs.blocking_s"] / report["cairn.blocking_s"]
    shutil.rmtree(os.path.join(a.dir, "cairn"), ignore_errors=True)
    launch(a, "reshard-save", "cairn", 4)
    resh = launch(a, "reshard-load", "cairn", 2)
    report["reshard.load_s"] = max(r["load_s"] for r in resh)
    report["reshard.correct"] = all(r["correct"] for r in resh)
    for _ in range(a.train_rounds):
        for side in ("none", "fs", "cairn"):
            shutil.rmtree(os.path.join(a.dir, side), ignore_errors=True)
            raw[side]["train"].append(max(r["train_s"] for r in launch(a, "train", side, a.ranks)))
    for side in ("none", "fs", "cairn"):
        report[f"train.{side}_s"] = statistics.median(raw[side]["train"])
    for side in sides:
        report[f"train.{side}_overhead_s"] = report[f"train.{side}_s"] - report["train.none_s"]
    fs_over = report["train.fs_overhead_s"]
    report["train.overhead_ratio_cairn_over_fs"] = report["train.cairn_overhead_s"] / fs_over if fs_over > 0 else None
    return report


if __name__ == "__main__":
    main()
