"""Shared fixtures of the Python test suite (tests/python, docs/python.md).

The package under test is the installed `cairn` (pip install .), not the
source tree: run `pytest tests/python` from a venv that has it.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any, Callable, Iterator

import pytest

import cairn

#: Repository root (examples/, bench/, include/ are found from it).
ROOT = pathlib.Path(__file__).resolve().parents[2]


#: Kept for the tests: the CUDA driver the core loads (once per process; run.sh
#: points it at the fake one), the libcairn_mpi that cairn.Client(comm=...)
#: loads (run.sh: the CMake tree's) and the test harness's own settings.
_KEPT = ("CAIRN_CUDA_DRIVER", "CAIRN_MPI_LIBRARY", "CAIRN_TEST_")


@pytest.fixture(autouse=True)
def _no_cairn_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """CAIRN_* variables of the caller's shell must not change the tests."""
    for key in list(os.environ):
        if key.startswith("CAIRN_") and not key.startswith(_KEPT):
            monkeypatch.delenv(key)


@pytest.fixture
def scratch(tmp_path: pathlib.Path) -> pathlib.Path:
    """An empty scratch directory."""
    return tmp_path / "scratch"


@pytest.fixture
def make_client(scratch: pathlib.Path) -> Iterator[Callable[..., cairn.Client]]:
    """Opens clients on `scratch` with a small cache; closes them at the end."""
    clients: list[cairn.Client] = []

    def make(**overrides: Any) -> cairn.Client:
        kw: dict[str, Any] = {"scratch_dir": scratch, "host_cache": "32MiB", "block_size": "1MiB"}
        kw.update(overrides)
        c = cairn.Client(**kw)
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


@pytest.fixture
def client(make_client: Callable[..., cairn.Client]) -> cairn.Client:
    """A client on `scratch` with a 32 MiB cache of 1 MiB blocks."""
    return make_client()
