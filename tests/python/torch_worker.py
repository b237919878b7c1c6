"""One rank of the multi-process cairn.torch tests (test_torch_dcp.py).

    python torch_worker.py ROLE ROOT RANK WORLD INIT_FILE [ARGS...]

Ranks meet through a gloo FileStore (INIT_FILE), so no port is needed. Roles:

* ``save-sharded``: a DTensor sharded over the ranks (rows), a replicated
  tensor and a bytes item, saved as step 1 (sync) and step 2 (async_save).
* ``load-sharded``: loads step 2 on this world size (resharded; plain tensors
  when WORLD is 1) and checks every byte against the values saved.
* ``replicated STEPS``: plain tensors every rank holds (a replicated model),
  one ``async_save`` per step with a new Writer each; prints ``captured S
  KEYS``, the keys this rank captured for step S.
* ``train STEPS [KILL_AT]``: a small model and Adam with a Checkpointer,
  restore_latest() first, one save per step; prints ``restored S`` and
  ``saved S``. With KILL_AT, rank 1 SIGKILLs itself inside the async save
  of that step, after its own data was captured and before it is durable.
"""

from __future__ import annotations

import os
import signal
import sys
from concurrent.futures import Future
from typing import Any, Callable

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict_loader import load
from torch.distributed.checkpoint.state_dict_saver import async_save, save

import cairn.torch

ROWS, COLS = 48, 8192  # a shard of 4 is over cairn.torch's packing limit, r under it


def reference(step: int) -> torch.Tensor:
    return torch.arange(ROWS * COLS, dtype=torch.float32).reshape(ROWS, COLS) * step + 0.5


def sharded_state(world: int, step: int) -> dict[str, Any]:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    full = reference(step)
    if world == 1 and not dist.is_initialized():
        return {"w": full.clone(), "r": full[:4].clone(), "note": {"step": step, "tag": "x" * 10}}
    mesh = init_device_mesh("cpu", (world,))
    return {
        "w": distribute_tensor(full, mesh, [Shard(0)]),
        "r": distribute_tensor(full[:4].clone(), mesh, [Replicate()]),
        "note": {"step": step, "tag": "x" * 10},
    }


def replicated_state(step: int) -> dict[str, torch.Tensor]:
    """Plain tensors over the packing limit, of four sizes."""
    return {f"p{i}": torch.full(((i % 4 + 1) * (1 << 16),), float(step * 10 + i)) for i in range(8)}


def telling_stage(w: cairn.torch.Writer, rank: int, step: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``w.stage`` that prints the keys it captured."""
    stage = w.stage

    def stage_and_tell(state_dict: dict[str, Any]) -> dict[str, Any]:
        out = stage(state_dict)
        print(f"rank {rank}: captured {step} {','.join(sorted(w._staged[-1].fqns or ()))}", flush=True)
        return out

    return stage_and_tell


def model_and_optimizer() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(7)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 8))
    return model, torch.optim.Adam(model.parameters(), lr=1e-2)


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, step: int) -> None:
    g = torch.Generator().manual_seed(step)  # the same batch on every rank, every run
    x = torch.randn(16, 32, generator=g)
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    opt.step()


def digest(model: torch.nn.Module) -> str:
    return " ".join(f"{p.double().sum().item():.12e}" for p in model.parameters())


def main() -> None:
    role, root, rank, world, init = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    if world > 1:
        dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=world)
    if role == "save-sharded":
        save(sharded_state(world, 1), storage_writer=cairn.torch.Writer(root), checkpoint_id="1")
        pending = async_save(sharded_state(world, 2), storage_writer=cairn.torch.Writer(root), checkpoint_id="2")
        assert isinstance(pending, Future)
        pending.result()
    elif role == "load-sharded":
        sd = sharded_state(world, 0)
        load(sd, storage_reader=cairn.torch.Reader(root))
        w = sd["w"].full_tensor() if hasattr(sd["w"], "full_tensor") else sd["w"]
        r = sd["r"].full_tensor() if hasattr(sd["r"], "full_tensor") else sd["r"]
        assert torch.equal(w, reference(2)), "w differs"
        assert torch.equal(r, reference(2)[:4]), "r differs"
        assert sd["note"] == {"step": 2, "tag": "x" * 10}, sd["note"]
        print(f"rank {rank}: loaded step 2 byte-exact on {world} ranks", flush=True)
    elif role == "replicated":
        for step in range(1, int(sys.argv[6]) + 1):
            w = cairn.torch.Writer(root)
            w.stage = telling_stage(w, rank, step)  # type: ignore[method-assign,assignment]
            pending = async_save(replicated_state(step), storage_writer=w, checkpoint_id=str(step))
            assert isinstance(pending, Future)
            pending.result()
    elif role == "train":
        steps = int(sys.argv[6])
        kill_at = int(sys.argv[7]) if len(sys.argv) > 7 else -1
        model, opt = model_and_optimizer()
        ckpt = cairn.torch.Checkpointer(model, opt, root)
        if kill_at >= 0 and rank == 1:
            write = ckpt.writer.write_data

            def write_then_die(plan, planner):  # type: ignore[no-untyped-def]
                if ckpt.writer._step == kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)
                return write(plan, planner)

            ckpt.writer.write_data = write_then_die  # type: ignore[method-assign]
        start = ckpt.restore_latest()
        print(f"rank {rank}: restored {start} {digest(model)}", flush=True)
        for step in range((start or 0) + 1, steps + 1):
            train_step(model, opt, step)
            ckpt.save(step)
            print(f"rank {rank}: saved {step} {digest(model)}", flush=True)
        ckpt.close()
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
