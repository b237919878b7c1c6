"""History: push in a forward pass, pop in reverse."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

import cairn


def test_push_pop_reverse(client: cairn.Client) -> None:
    u = np.zeros((64, 64), np.float32)
    with client.history("adjoint") as h:
        for s in range(20):
            u[:] = s
            h.push(s, u)
        out = np.empty_like(u)
        for s in reversed(range(20)):
            assert h.step_size(s) == u.nbytes
            got = h.pop(s, out=out)
            assert got is out
            assert (out == s).all()
        with pytest.raises(cairn.NotFoundError):
            h.pop(5, out=out)  # consumed


def test_variable_sizes_and_pop_without_out(client: cairn.Client) -> None:
    with client.history("var") as h:
        for s in range(5):
            h.push(s, bytes([s]) * (s * 1000 + 1))  # read-only data is fine to push
        for s in reversed(range(5)):
            b = h.pop(s)
            assert isinstance(b, bytearray) and b == bytes([s]) * (s * 1000 + 1)


def test_pop_into_small_buffer_keeps_the_step(client: cairn.Client) -> None:
    with client.history("small") as h:
        h.push(0, np.arange(100.0))
        with pytest.raises(cairn.SizeMismatchError):
            h.pop(0, out=np.empty(99))
        out = np.empty(100)
        h.pop(0, out=out)
        np.testing.assert_array_equal(out, np.arange(100.0))


def test_push_twice(client: cairn.Client) -> None:
    with client.history("twice") as h:
        h.push(1, b"a")
        with pytest.raises(cairn.ExistsError):
            h.push(1, b"b")


def test_pop_after_close_and_reopen(client: cairn.Client) -> None:
    h = client.history("closing")
    h.push(0, b"zero")
    h.push(1, b"one")
    with pytest.raises(cairn.StateError):
        client.history("closing")  # open already
    h.close()
    assert h.closed
    with pytest.raises(cairn.StateError) as e:
        h.pop(1)
    assert e.value.code == -9
    with client.history("closing") as again:  # ephemeral: the steps are gone
        with pytest.raises(cairn.NotFoundError):
            again.pop(1)


def test_larger_than_the_cache(make_client: Callable[..., cairn.Client]) -> None:
    """40 MiB of steps through a 16 MiB cache: evicted, then prefetched back."""
    c = make_client(host_cache="16MiB", block_size="1MiB")
    step = np.empty(1 << 18, np.float32)  # 1 MiB
    with c.history("big") as h:
        for s in range(40):
            step[:] = s
            h.push(s, step)
        for s in reversed(range(40)):
            h.pop(s, out=step)
            assert step[0] == s and step[-1] == s
    st = c.stats()
    assert st.evictions > 0
    assert st.cache_hits + st.cache_misses == 40
