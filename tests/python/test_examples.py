"""The examples (examples/python) and the benchmark's smoke run (bench/python)."""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys

import numpy as np

from conftest import ROOT

EXAMPLES = ROOT / "examples" / "python"


def run(*args: str, timeout: float = 120) -> str:
    proc = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_wave(tmp_path: pathlib.Path) -> None:
    out = run(str(EXAMPLES / "wave.py"), "--steps", "700", "--scratch", str(tmp_path))
    assert "snapshots intact: 700 of 700" in out
    m = re.search(r"strongest image at depth (\d+) cells; reflector at (\d+) cells", out)
    assert m, out
    assert abs(int(m.group(1)) - int(m.group(2))) <= 3, out
    pops = re.search(r"pops: (\d+) from the cache, (\d+) from files, (\d+) prefetched", out)
    assert pops and int(pops.group(3)) > 0, out  # the cache was too small: prefetching worked


def test_fault_tolerance_resumes_after_sigkill(tmp_path: pathlib.Path) -> None:
    script = str(EXAMPLES / "fault_tolerance.py")
    common = ["--iterations", "60", "--every", "5", "--size", "128"]

    # Reference: one uninterrupted run.
    run(script, *common, "--scratch", str(tmp_path / "ref"), "--out", str(tmp_path / "ref.npy"))

    # Killed once it has saved version 20 (so 15 is durable), then rerun.
    scratch = str(tmp_path / "ft")
    proc = subprocess.Popen(
        [sys.executable, script, *common, "--scratch", scratch, "--delay", "0.02"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if line.strip() == "saved version 20":
            os.kill(proc.pid, signal.SIGKILL)
            break
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "".join(seen)

    out = run(script, *common, "--scratch", scratch, "--out", str(tmp_path / "ft.npy"))
    m = re.search(r"resumed from version (\d+)", out)
    assert m, out
    assert 15 <= int(m.group(1)) < 60, out
    np.testing.assert_array_equal(np.load(tmp_path / "ft.npy"), np.load(tmp_path / "ref.npy"))


def test_savez_bench_smoke(tmp_path: pathlib.Path) -> None:
    out_json = tmp_path / "bench.json"
    out = run(
        str(ROOT / "bench" / "python" / "savez_bench.py"),
        "--size", "32MiB", "--arrays", "4", "--repeat", "1",
        "--dir", str(tmp_path / "bench"), "--json", str(out_json),
    )  # fmt: skip
    assert "numpy.savez + fsync" in out
    doc = json.loads(out_json.read_text())
    assert doc["bytes"] == 32 << 20
    assert set(doc["median_seconds"]) == {
        "cairn save (blocking)",
        "cairn save + wait(local)",
        "numpy.savez",
        "numpy.savez + fsync",
    }
    assert all(r > 0 for r in doc["ratios"].values())
