"""Placement from Python (docs/design.md, "Placement"; docs/python.md):
register_thread, restore_affinity and host_cache_numa."""

from __future__ import annotations

import os
import threading
from typing import Callable

import numpy as np
import pytest

import cairn


def test_register_thread_and_restore_affinity(make_client: Callable[..., cairn.Client]) -> None:
    client = make_client()
    with pytest.raises(cairn.InvalidArgumentError):
        client.register_thread(-2)
    with pytest.raises(cairn.StateError):
        client.restore_affinity(0)  # nothing restored yet
    mine = os.sched_getaffinity(0)
    target = max(mine)
    a = np.arange(1 << 16, dtype=np.int64)
    client.protect(1, a)
    registered, done = threading.Event(), threading.Event()

    def worker() -> None:  # pinned to one CPU, alive during the checkpoint
        os.sched_setaffinity(0, {target})
        client.register_thread(3)
        registered.set()
        done.wait()

    t = threading.Thread(target=worker)
    t.start()
    try:
        registered.wait()
        client.checkpoint("aff", 1)
        client.wait("aff", 1)
    finally:
        done.set()
        t.join()
    a[:] = 0
    client.restore("aff", 1)
    assert a[-1] == (1 << 16) - 1
    try:
        client.restore_affinity(3)
        assert os.sched_getaffinity(0) == {target}
        with pytest.raises(cairn.NotFoundError):
            client.restore_affinity(7)
        client.restore_affinity()  # the checkpointing thread: this one, on all of `mine`
        assert os.sched_getaffinity(0) == mine
    finally:
        os.sched_setaffinity(0, mine)


def test_keep_makes_restore_affinity_a_no_op(make_client: Callable[..., cairn.Client]) -> None:
    client = make_client(placement="keep")
    a = np.ones(4096, dtype=np.uint8)
    client.protect(1, a)
    client.checkpoint("keep", 1)
    client.restore("keep", 1)
    client.restore_affinity(5)  # would be NotFound with "restore"


def test_host_cache_numa_keyword(make_client: Callable[..., cairn.Client]) -> None:
    assert make_client().config["host_cache_numa"] == "auto"
    assert make_client(host_cache_numa="off").config["host_cache_numa"] == "off"
    with pytest.raises(cairn.ConfigError, match="host_cache.numa"):
        make_client(host_cache_numa="sometimes")
    # String keys that are not paths stay as given (they were made absolute
    # like paths before).
    assert make_client(placement="interleave").config["placement"] == "interleave"
    assert make_client(zero_copy_order="address").config["zero_copy_order"] == "address"


def test_numa_stats_are_in_stats(client: cairn.Client) -> None:
    st = client.stats()
    assert st.numa_local_chunks == 0 and st.numa_remote_chunks == 0  # no capture yet
