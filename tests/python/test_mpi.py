"""cairn.Client(comm=...) (docs/python.md, "MPI jobs").

The MPI test runs mpi_worker.py under ``mpirun -np 2``: it needs mpi4py and
libcairn_mpi (tests/python/run.sh installs mpi4py and points
CAIRN_MPI_LIBRARY at the CMake tree's build/lib/libcairn_mpi.so). Without
mpi4py, ``comm=`` must raise a clear error, which runs everywhere."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import cairn

WORKER = Path(__file__).with_name("mpi_worker.py")


def test_comm_without_mpi4py_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import mpi4py raises ImportError
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", None)
    with pytest.raises(cairn.UnsupportedError, match="needs mpi4py"):
        cairn.Client(scratch_dir=str(tmp_path), host_cache="1MiB", comm=object())


def test_comm_must_be_a_communicator(tmp_path: Path) -> None:
    pytest.importorskip("mpi4py.MPI", reason="mpi4py is not installed (tests/python/run.sh installs it)")
    with pytest.raises(cairn.InvalidArgumentError, match="mpi4py communicator"):
        cairn.Client(scratch_dir=str(tmp_path), host_cache="1MiB", comm=42)


def test_two_ranks(tmp_path: Path) -> None:
    pytest.importorskip("mpi4py.MPI", reason="mpi4py is not installed (tests/python/run.sh installs it)")
    library = os.environ.get("CAIRN_MPI_LIBRARY")
    if not library or not os.path.exists(library):
        pytest.skip("no libcairn_mpi (CAIRN_MPI_LIBRARY; run.sh sets it when build/lib has one)")
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        pytest.skip("no mpirun")
    cmd = [mpirun, "-np", "2", "--oversubscribe", "--timeout", "120", "--mca", "btl", "self,vader"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    # Its own session directory: two mpiruns that start together race to create
    # the shared one (cmake/CairnMpiSessions.cmake says more).
    env = dict(os.environ, OMPI_MCA_btl_vader_single_copy_mechanism="none",
               OMPI_MCA_orte_tmpdir_base=str(tmp_path / "ompi"))
    cmd += [sys.executable, str(WORKER), str(tmp_path)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all checks passed on 2 ranks" in done.stdout
