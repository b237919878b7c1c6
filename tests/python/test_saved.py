"""Reading a saved MPI job's ranks from one Python process (docs/mpi.md,
"Restarting on another number of ranks"; docs/format.md 3.6-3.7): a job of
three ranks is laid out as libcairn_mpi lays it out (<scratch>/rank<r>, and
each rank's global manifest), then a plain client on the same scratch root
reads every saved rank's slice of a 1-D array back into one array."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import cairn

RANKS = 3
N = 100_003  # global elements


def first(r: int) -> int:
    return N * r // RANKS


def save_job(root: pathlib.Path, committed: int) -> None:
    for r in range(RANKS):
        rank_dir = root / f"rank{r}"
        with cairn.Client(scratch_dir=rank_dir, host_cache="8MiB", block_size="64KiB") as c:
            a = np.arange(first(r), first(r + 1), dtype=np.int64)
            c.protect(0, a)
            for v in (1, 2):
                a += v * 1_000_000
                c.checkpoint("field", v)
                c.wait("field", v)
        # The manifest a collective wait of the job writes (format.md 3.6).
        (rank_dir / "field" / "global").write_text(
            f"cairn-global 1\nranks {RANKS}\ncommitted {committed}\npersistent -1\nranks_per_node 0\n"
        )


def expected(v: int) -> np.ndarray:
    a = np.arange(N, dtype=np.int64)
    for step in range(1, v + 1):
        a += step * 1_000_000
    return a


def test_one_process_reads_every_saved_rank(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "scratch"
    save_job(root, committed=2)
    with cairn.Client(scratch_dir=root, host_cache="8MiB", block_size="64KiB") as c:
        assert c.saved_latest("field") == (2, RANKS)
        assert c.saved_ranks("field", 2) == RANKS
        whole = np.empty(N, dtype=np.int64)
        for s in range(RANKS):
            n = c.saved_region_size("field", 2, s, 0) // 8
            assert n == first(s + 1) - first(s)
            c.read_saved_region("field", 2, s, 0, whole[first(s) : first(s) + n])
        assert (whole == expected(2)).all()
        window = np.empty(10, dtype=np.int64)  # a window inside saved rank 1's slice
        c.read_saved_region("field", 1, 1, 0, window, offset=8 * 500)
        assert (window == expected(1)[first(1) + 500 : first(1) + 510]).all()

        with pytest.raises(cairn.InvalidArgumentError, match="does not exist"):
            c.read_saved_region("field", 2, RANKS, 0, window)
        with pytest.raises(cairn.InvalidArgumentError, match="no region id 5"):
            c.read_saved_region("field", 2, 0, 5, window)
        with pytest.raises(cairn.InvalidArgumentError, match="outside region 0"):
            c.read_saved_region("field", 2, 0, 0, window, offset=8 * (first(1) - 5))
        assert c.saved_latest("nothing") is None


def test_a_version_not_globally_committed_is_not_read(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "scratch"
    save_job(root, committed=1)  # version 2 exists on every rank, never agreed
    with cairn.Client(scratch_dir=root, host_cache="8MiB", block_size="64KiB") as c:
        assert c.saved_latest("field") == (1, RANKS)
        out = np.empty(4, dtype=np.int64)
        with pytest.raises(cairn.NotFoundError, match="not globally committed"):
            c.read_saved_region("field", 2, 0, 0, out)
