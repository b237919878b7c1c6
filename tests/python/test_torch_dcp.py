"""cairn.torch: DCP's save, async_save and load through Cairn, and the
training-loop Checkpointer, in one process and on 1, 2 and 4 gloo ranks."""

from __future__ import annotations

import dataclasses
import gc
import glob
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

torch = pytest.importorskip("torch")
dcp = pytest.importorskip("torch.distributed.checkpoint")
import cairn  # noqa: E402
import cairn.torch  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled")

WORKER = str(Path(__file__).with_name("torch_worker.py"))


@pytest.fixture(autouse=True)
def _fresh_clients() -> Iterator[None]:
    yield
    cairn.torch.close_clients()


def launch(role: str, root: Path, world: int, *args: object) -> List["subprocess.Popen[str]"]:
    init = root.parent / f"init-{role}-{world}-{os.urandom(4).hex()}"
    env = dict(os.environ, CAIRN_HOST_CACHE="64MiB", OMP_NUM_THREADS="1")
    return [
        subprocess.Popen(
            [sys.executable, WORKER, role, str(root), str(r), str(world), str(init), *map(str, args)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        )  # fmt: skip
        for r in range(world)
    ]


def finish(procs: List["subprocess.Popen[str]"]) -> List[str]:
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0, out
        outs.append(out)
    return outs


def run(role: str, root: Path, world: int, *args: object) -> List[str]:
    return finish(launch(role, root, world, *args))


def lines(out: str, word: str) -> Dict[int, str]:
    """``{step: model digest}`` of a worker's "restored"/"saved" lines."""
    found = {}
    for line in out.splitlines():
        parts = line.split(" ", 3)
        if len(parts) == 4 and parts[2] == word and parts[3] and parts[3].split(" ")[0] != "None":
            step, digest = parts[3].split(" ", 1)
            found[int(step)] = digest
    return found


def test_save_load_one_process(tmp_path: Path) -> None:
    m = torch.nn.Linear(16, 8)
    t = torch.arange(40, dtype=torch.float64).reshape(8, 5)  # small: packed with m's tensors
    big = torch.arange(1 << 17, dtype=torch.float32)  # over the packing limit: a region of its own
    sd = {
        "m": m.state_dict(), "view": t[::2, 1:4], "obj": {"lr": 0.25, "name": "run"}, "empty": torch.zeros(0),
        "big": big, "big_view": big[10:1000:3], "flags": torch.tensor([True, False, True]),
    }  # fmt: skip
    assert cairn.torch._writer.PACK_BELOW < big.nbytes
    dcp.save(sd, storage_writer=cairn.torch.Writer(tmp_path), checkpoint_id=3)
    future = dcp.async_save(sd, storage_writer=cairn.torch.Writer(tmp_path), checkpoint_id="4")
    t.add_(100)  # after staging: not in step 4
    big.add_(100)
    future.result()
    for step, base in ((3, 100), (4, 100)):
        into = {
            "m": torch.nn.Linear(16, 8).state_dict(), "view": torch.zeros(4, 3, dtype=torch.float64),
            "obj": {"lr": 0.0, "name": ""}, "empty": torch.zeros(0),
            "big": torch.zeros(1 << 17), "big_view": torch.zeros(330), "flags": torch.zeros(3, dtype=torch.bool),
        }  # fmt: skip
        dcp.load(into, storage_reader=cairn.torch.Reader(tmp_path, step))
        for k, v in m.state_dict().items():
            assert torch.equal(into["m"][k], v)
        assert torch.equal(into["view"], (t - base)[::2, 1:4])
        assert into["obj"] == {"lr": 0.25, "name": "run"}
        assert torch.equal(into["big"], big - base) and torch.equal(into["big_view"], (big - base)[10:1000:3])
        assert into["flags"].tolist() == [True, False, True]
    assert cairn.torch.Reader(tmp_path).store.steps() == [4, 3]


def test_a_load_is_one_restore_from_metadata_to_data(tmp_path: Path) -> None:
    from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner

    sd = {"w": torch.arange(1 << 16, dtype=torch.float32), "b": torch.ones(3)}
    dcp.save(sd, storage_writer=cairn.torch.Writer(tmp_path), checkpoint_id=1)
    reader = cairn.torch.Reader(tmp_path)
    client = reader.store.client
    seen: List[int] = []

    class Watching(DefaultLoadPlanner):
        def commit_tensor(self, read_item: object, tensor: object) -> None:
            seen.append(client.stats().init.restores_now)
            super().commit_tensor(read_item, tensor)  # type: ignore[arg-type]

    into = {"w": torch.zeros(1 << 16), "b": torch.zeros(3)}
    dcp.load(into, storage_reader=reader, planner=Watching())
    assert torch.equal(into["w"], sd["w"]) and torch.equal(into["b"], sd["b"])
    assert seen and all(n >= 1 for n in seen), seen
    assert client.stats().init.restores_now == 0, "still counted after the load"
    from torch.distributed.checkpoint.api import CheckpointException

    class Failing(DefaultLoadPlanner):
        def commit_tensor(self, read_item: object, tensor: object) -> None:
            raise RuntimeError("the planner failed mid-load")

    with pytest.raises((CheckpointException, RuntimeError)):
        dcp.load({"w": torch.zeros(1 << 16), "b": torch.zeros(3)}, storage_reader=reader, planner=Failing())
    assert client.stats().init.restores_now == 0, "still counted after a load that failed reading"
    # One that fails planning (after read_metadata began it): ended by the
    # reader's next load, or when the reader goes.
    with pytest.raises(CheckpointException):
        dcp.load({"w": torch.zeros(5), "b": torch.zeros(3)}, storage_reader=reader)
    assert client.stats().init.restores_now == 1, "the planning is part of the load"
    dcp.load(into, storage_reader=reader)
    assert client.stats().init.restores_now == 0, "still counted after the next load"
    with pytest.raises(CheckpointException):
        dcp.load({"w": torch.zeros(5), "b": torch.zeros(3)}, storage_reader=cairn.torch.Reader(tmp_path))
    gc.collect()
    assert client.stats().init.restores_now == 0, "still counted after the reader went"


def test_async_save_blocks_only_for_the_capture(tmp_path: Path) -> None:
    """What stage() returns holds the same tensor objects (nothing copied for
    the planner) and copies of the other values."""
    w = cairn.torch.Writer(tmp_path)
    t = torch.ones(1000)
    meta = {"k": [1, 2]}
    staged = w.stage({"t": t, "meta": meta})
    assert staged["t"] is t and staged["meta"] == meta and staged["meta"] is not meta
    dcp.save(staged, storage_writer=w, checkpoint_id=1)  # uses the capture
    t.zero_()
    into = {"t": torch.empty(1000), "meta": {"k": []}}
    dcp.load(into, storage_reader=cairn.torch.Reader(tmp_path, 1))
    assert torch.equal(into["t"], torch.ones(1000)) and into["meta"] == {"k": [1, 2]}


def test_replicated_items_go_to_a_rank_that_captured_them(tmp_path: Path) -> None:
    """After DCP's deduplication, an item given to a rank that skipped it at
    staging moves to one that has it; with no such rank the save fails."""
    from torch.distributed.checkpoint.metadata import MetadataIndex
    from torch.distributed.checkpoint.planner import SavePlan, WriteItem, WriteItemType

    def item(fqn: str, kind: WriteItemType = WriteItemType.TENSOR) -> WriteItem:
        return WriteItem(index=MetadataIndex(fqn), type=kind)

    w = cairn.torch.Writer(tmp_path)
    plans = [
        SavePlan([item("a"), item("b"), item("step", WriteItemType.BYTE_IO)], storage_data=frozenset({"a"})),
        SavePlan([item("c")], storage_data=frozenset({"b", "c"})),
    ]
    out = w.prepare_global_plan(plans)
    assert [sorted(i.index.fqn for i in p.items) for p in out] == [["a", "step"], ["b", "c"]]
    assert all(p.storage_data is None for p in out)
    with pytest.raises(cairn.InvalidArgumentError, match="no rank captured 'd'"):
        w.prepare_global_plan([SavePlan([item("d")], storage_data=frozenset())])


def test_versions_several_ranks_of_a_node_read_are_marked_shared(tmp_path: Path) -> None:
    """The coordinator marks in each plan the saved versions that another rank
    of the same node reads too; those are read through the page cache."""
    from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner

    from cairn.torch._reader import _Node

    sd = {"a": torch.arange(1 << 17, dtype=torch.float32), "b": torch.ones(1 << 17)}
    dcp.save(sd, storage_writer=cairn.torch.Writer(tmp_path), checkpoint_id=1)
    r = cairn.torch.Reader(tmp_path, 1)
    md = r.read_metadata()
    r.set_up_storage_reader(md, True)
    planner = DefaultLoadPlanner()
    planner.set_up_planner({k: torch.empty_like(v) for k, v in sd.items()}, md, True)
    local = r.prepare_local_plan(planner.create_local_plan())
    assert isinstance(local.storage_data, _Node) and local.storage_data.host
    version = {(loc.rank, loc.version) for loc in md.storage_data.values() if loc.inline is None}
    assert len(version) == 1
    plans = [dataclasses.replace(local, storage_data=_Node(h)) for h in ("n1", "n1", "n2")]
    out = r.prepare_global_plan(plans)
    assert [p.storage_data.shared for p in out] == [frozenset(version), frozenset(version), frozenset()]
    assert [p.storage_data.host for p in out] == ["n1", "n1", "n2"]
    into = {k: torch.zeros_like(v) for k, v in sd.items()}
    planner.set_up_planner(into, md, True)
    r.read_data(out[0], planner).wait()  # a shared read
    assert all(torch.equal(into[k], v) for k, v in sd.items())


def test_checkpoint_ids_are_steps(tmp_path: Path) -> None:
    with pytest.raises(cairn.InvalidArgumentError, match="step number"):
        cairn.torch.Writer(tmp_path).reset("/some/path")
    assert cairn.torch.Writer.validate_checkpoint_id("12")
    assert not cairn.torch.Writer.validate_checkpoint_id("/ckpt/12")
    from torch.distributed.checkpoint.api import CheckpointException

    with pytest.raises(CheckpointException, match="no committed step"):  # DCP's wrapping
        dcp.load({"t": torch.zeros(1)}, storage_reader=cairn.torch.Reader(tmp_path / "empty"))


def test_checkpointer_one_process(tmp_path: Path) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.Adam(model.parameters())
    ckpt = cairn.torch.Checkpointer(model, opt, tmp_path, mtbf_s=3600)
    assert ckpt.restore_latest() is None
    assert ckpt.checkpoint_due()  # before the first save: it measures the cost
    for step in (1, 2):
        model(torch.randn(4, 8)).sum().backward()
        opt.step()
        ckpt.save(step)
    ckpt.close()
    other = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    other_opt = torch.optim.Adam(other.parameters())
    assert cairn.torch.Checkpointer(other, other_opt, tmp_path).restore_latest() == 2
    for a, b in zip(model.parameters(), other.parameters()):
        assert torch.equal(a, b)
    s, o = opt.state_dict()["state"], other_opt.state_dict()["state"]
    assert all(torch.equal(s[i]["exp_avg_sq"], o[i]["exp_avg_sq"]) for i in s)


def test_save_on_4_ranks_load_on_2_and_1(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    run("save-sharded", root, 4)
    for world in (2, 1):
        outs = run("load-sharded", root, world)
        assert all(f"loaded step 2 byte-exact on {world} ranks" in o for o in outs), outs


def test_ranks_capture_only_the_replicated_tensors_they_write(tmp_path: Path) -> None:
    """Every rank holds the same plain tensors; from the first save on each
    captures a part, the parts split the state in bytes about evenly, and
    the split holds from save to save."""
    root = tmp_path / "ckpt"
    outs = run("replicated", root, 2, 3)
    sys.path.insert(0, str(Path(WORKER).parent))
    from torch_worker import replicated_state

    state = replicated_state(3)
    parts: Dict[int, List[List[str]]] = {}
    for rank, out in enumerate(outs):
        for line in out.splitlines():
            if line.startswith(f"rank {rank}: captured "):
                parts.setdefault(rank, []).append(line.split(" ", 4)[4].split(","))
    assert [len(p) for p in parts.values()] == [3, 3], outs
    for save in range(3):
        a, b = set(parts[0][save]), set(parts[1][save])
        assert a and b and not a & b and a | b == set(state), (save, a, b)
        sizes = [sum(state[k].nbytes for k in part) for part in (a, b)]
        assert max(sizes) <= 1.5 * min(sizes), sizes
    assert parts[0][0] == parts[0][1] == parts[0][2]
    into = {k: torch.zeros_like(v) for k, v in state.items()}
    dcp.load(into, storage_reader=cairn.torch.Reader(root, 3))
    assert all(torch.equal(into[k], v) for k, v in state.items())


def test_rank_killed_in_async_save_restarts_from_the_newest_complete_step(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    procs = launch("train", root, 2, 5, 3)  # rank 1 dies in step 3's save
    procs[1].wait(timeout=600)
    assert procs[1].returncode == -9
    procs[0].kill()  # it waits for rank 1 in the collective
    first, _ = procs[0].communicate()
    saved = lines(first, "saved")
    assert 2 in saved, first
    for attempt in range(2):  # killed in the same save again: step 2's data must survive
        procs = launch("train", root, 2, 5, 3)
        procs[1].wait(timeout=600)
        procs[0].kill()
        again, _ = procs[0].communicate()
        assert lines(again, "restored") == {2: saved[2]}, again
    outs = run("train", root, 2, 4)
    for out in outs:
        restored = lines(out, "restored")
        assert list(restored) == [2], out  # never step 3: it did not complete
        assert restored[2] == saved[2]
        assert 4 in lines(out, "saved")


def test_a_corrupted_shard_makes_every_rank_fall_back(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    first = run("train", root, 2, 2)
    saved = lines(first[0], "saved")
    reader = cairn.torch.Reader(root, 2, name="train")
    ranks = {loc.rank for loc in reader.read_metadata().storage_data.values() if loc.inline is None}
    assert 1 in ranks  # rank 1 holds part of step 2
    cairn.torch.close_clients()
    newest = sorted(glob.glob(str(root / "train.rank1" / "v*.cairn")))[-1]
    with open(newest, "r+b") as f:  # a byte of the data area (docs/format.md 2.2)
        f.seek(4096 + 10)
        b = f.read(1)
        f.seek(4096 + 10)
        f.write(bytes([b[0] ^ 0xFF]))
    outs = run("train", root, 2, 2)
    for out in outs:
        restored = lines(out, "restored")
        assert list(restored) == [1], out
        assert restored[1] == saved[1]
        assert "did not load" in out


DCP_BENCH_KEYS = {
    "cairn.blocking_s", "fs.blocking_s", "cairn.durable_s", "fs.durable_s",
    "cairn.load_s", "fs.load_s", "cairn.peak_extra_bytes", "fs.peak_extra_bytes",
}  # fmt: skip


def test_dcp_bench_smoke(tmp_path: Path) -> None:
    """bench/python/dcp_bench.py runs end to end and reports the keys scripts read."""
    import json

    out = tmp_path / "dcp.json"
    bench = Path(__file__).resolve().parents[2] / "bench" / "python" / "dcp_bench.py"
    subprocess.run(
        [sys.executable, str(bench), "--size", "0.02", "--ranks", "2", "--saves", "2",
         "--train-steps", "2", "--train-rounds", "1", "--load-rounds", "1", "--every", "1", "--dir", str(tmp_path / "d"), "--json", str(out)],
        check=True, timeout=600, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    doc = json.loads(out.read_text())
    assert DCP_BENCH_KEYS <= set(doc)
    assert doc["cairn.load_correct"] and doc["fs.load_correct"] and doc["reshard.correct"]
    assert all(doc[k] > 0 for k in DCP_BENCH_KEYS)
