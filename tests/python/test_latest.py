"""latest() falls back to an older version when the newest file is damaged."""

from __future__ import annotations

import pathlib
from typing import Callable

import numpy as np
import pytest

import cairn


def version_file(scratch: pathlib.Path, name: str, version: int) -> pathlib.Path:
    """docs/format.md 3.1: <dir>/<name>/v<20-digit version>.cairn."""
    return scratch / name / f"v{version:020d}.cairn"


def test_latest_skips_a_corrupted_newest_version(
    scratch: pathlib.Path, make_client: Callable[..., cairn.Client]
) -> None:
    a = np.zeros(1 << 16)
    with make_client(keep_versions=3) as c:
        c.protect(0, a)
        for v in (1, 2, 3):
            a[:] = v
            c.checkpoint("run", v)
            c.wait("run", v)
    path = version_file(scratch, "run", 3)
    assert path.exists()
    with open(path, "r+b") as f:  # flip one byte of the data area (after the 4 KiB header)
        f.seek(4096 + 100)
        byte = f.read(1)
        f.seek(4096 + 100)
        f.write(bytes([byte[0] ^ 0xFF]))

    with make_client(keep_versions=3) as c:  # a fresh client: nothing cached
        assert c.latest("run") == 2
        c.protect(0, a)
        with pytest.raises(cairn.CorruptError) as e:
            c.restore("run", 3)
        assert e.value.code == -4
        assert "checksum mismatch" in e.value.message
        c.restore("run", 2)
        assert (a == 2).all()


def test_latest_none_when_everything_is_damaged(
    scratch: pathlib.Path, make_client: Callable[..., cairn.Client]
) -> None:
    with make_client() as c:
        c.protect(0, np.ones(1000))
        c.checkpoint("bad", 0)
        c.wait("bad", 0)
    path = version_file(scratch, "bad", 0)
    data = bytearray(path.read_bytes())
    data[4096] ^= 1
    path.write_bytes(bytes(data))
    with make_client() as c:
        assert c.latest("bad") is None
