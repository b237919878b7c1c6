"""cairn.Client(comm=...) on every rank of an mpirun job (test_mpi.py runs it
with 2 ranks). Checks: collective waits of versions 1-3; a version that one
rank lacks fails the collective wait on every rank; after reopening, latest
and restore_latest give version 3 on every rank, byte-exact, in this rank's
own directory; saved_latest sees (3, ranks); ranks_per_node=1 gives each
rank a simulated node's directory; configurations that differ across ranks,
or do not load on one rank, raise ConfigError on every rank.
Exits 1 on every rank when any rank failed (printing why)."""

import os
import sys
import traceback
from typing import Any, Dict

import numpy as np
from mpi4py import MPI

import cairn

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
root = sys.argv[1]
N = 100_003  # several 64 KiB blocks, the last one partial


def content(v: int) -> "np.ndarray":
    return np.arange(N, dtype=np.float64) * (v + 1) + rank * 1e6


def client(**kw: object) -> cairn.Client:
    opts: Dict[str, Any] = dict(scratch_dir=root, host_cache="4MiB", block_size="64KiB", init="lazy", copy_threads=0)
    opts.update(kw)
    return cairn.Client(comm=comm, **opts)


def run() -> None:
    a = np.zeros(N)
    with client() as c:
        c.protect(1, a)
        for v in (1, 2, 3):
            a[:] = content(v)
            c.checkpoint("state", v)
            c.wait("state", v)
        if rank == 0:
            a[:] = content(4)
            c.checkpoint("state", 4)
        try:
            c.wait("state", 4)
            raise AssertionError("the collective wait for version 4, which rank 1 lacks, succeeded")
        except cairn.Error as e:
            assert "rank" in str(e), f"the error does not name the rank: {e}"
    assert os.path.isdir(os.path.join(root, f"rank{rank}", "state")), "no per-rank directory"

    a[:] = 0
    with client() as c:
        c.protect(1, a)
        assert c.latest("state") == 3, f"latest {c.latest('state')}, want 3"
        got = c.restore_latest("state")
        assert got == 3, f"restore_latest gave {got}, want 3"
        assert np.array_equal(a, content(3)), "restored data is not this rank's version 3"
        assert c.saved_latest("state") == (3, size), f"saved_latest {c.saved_latest('state')}"
    assert comm.allreduce(got, op=MPI.MIN) == comm.allreduce(got, op=MPI.MAX) == 3

    # ranks_per_node=1 (mpi.ranks_per_node): each rank its own simulated node,
    # with its own local directory <root>/node<rank>.
    a[:] = content(5)
    with client(ranks_per_node=1) as c:
        c.protect(1, a)
        c.checkpoint("nodes", 1)
        c.wait("nodes", 1)
    assert os.path.isdir(os.path.join(root, f"node{rank}", f"rank{rank}", "nodes")), "no simulated node directory"
    try:
        client(ranks_per_node=1 if rank == 0 else 2).close()
        raise AssertionError("ranks_per_node that differs across ranks opened")
    except cairn.ConfigError as e:
        assert "ranks_per_node" in str(e), f"'{e}' does not name ranks_per_node"

    # Disagreements fail on every rank, not a hang.
    last = size - 1
    try:
        client(block_size="64KiB" if rank == 0 else "128KiB").close()
        raise AssertionError("block sizes that differ across ranks opened")
    except cairn.ConfigError as e:
        assert "block_size" in str(e), f"'{e}' does not name block_size"
    try:
        client(host_cache="lots" if rank == last else "4MiB").close()
        raise AssertionError("a configuration that does not load on the last rank opened")
    except cairn.ConfigError as e:
        want = "lots" if rank == last else f"rank {last}"
        assert want in str(e), f"'{e}' does not name {want}"

failed = 0
try:
    run()
except Exception:
    traceback.print_exc()
    print(f"rank {rank}: FAILED", flush=True)
    failed = 1
failed = comm.allreduce(failed)
if rank == 0 and failed == 0:
    print(f"mpi_worker: all checks passed on {size} ranks", flush=True)
sys.exit(1 if failed else 0)
