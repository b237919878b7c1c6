"""latest() skips versions whose structure is damaged (it reads no data);
restore_latest() restores the newest version that verifies, falling back to
older ones when the newest one's data is damaged."""

from __future__ import annotations

import pathlib
from typing import Callable

import numpy as np
import pytest

import cairn


def version_file(scratch: pathlib.Path, name: str, version: int) -> pathlib.Path:
    """docs/format.md 3.1: <dir>/<name>/v<20-digit version>.cairn."""
    return scratch / name / f"v{version:020d}.cairn"


def flip(path: pathlib.Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


def write_three(make_client: Callable[..., cairn.Client], a: np.ndarray) -> None:
    with make_client(keep_versions=3) as c:
        c.protect(0, a)
        for v in (1, 2, 3):
            a[:] = v
            c.checkpoint("run", v)
            c.wait("run", v)


def test_restore_latest_falls_back_when_the_newest_data_is_damaged(
    scratch: pathlib.Path, make_client: Callable[..., cairn.Client]
) -> None:
    a = np.zeros(1 << 16)
    write_three(make_client, a)
    path = version_file(scratch, "run", 3)
    assert path.exists()
    flip(path, 4096 + 100)  # one byte of the data area (after the 4 KiB header)

    with make_client(keep_versions=3) as c:  # a fresh client: nothing cached
        assert c.latest("run") == 3  # the structure is fine; latest reads no data
        c.protect(0, a)
        with pytest.raises(cairn.CorruptError) as e:
            c.restore("run", 3)
        assert e.value.code == -4
        assert "checksum mismatch" in e.value.message
        assert "version 3 of 'run' is damaged" in e.value.message
        a[:] = -1
        assert c.restore_latest("run") == 2
        assert (a == 2).all()


def test_latest_skips_a_damaged_footer(
    scratch: pathlib.Path, make_client: Callable[..., cairn.Client]
) -> None:
    a = np.zeros(1 << 16)
    write_three(make_client, a)
    path = version_file(scratch, "run", 3)
    flip(path, path.stat().st_size - 64 + 16)  # the footer's table_crc
    with make_client(keep_versions=3) as c:
        assert c.latest("run") == 2
        c.protect(0, a)
        a[:] = -1
        assert c.restore_latest("run") == 2
        assert (a == 2).all()
        assert c.restore_latest("nothing") is None


def test_restore_latest_none_when_everything_is_damaged(
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
        assert c.latest("bad") == 0
        c.protect(0, np.zeros(1000))
        assert c.restore_latest("bad") is None
