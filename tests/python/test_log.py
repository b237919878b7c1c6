"""cairn.set_log: the library's messages reach a Python function (or Python's
logging), delivered from the extension's own thread (bindings/python/src/log.cpp)."""

from __future__ import annotations

import logging
import sys
import threading
from pathlib import Path
from typing import List, Tuple

import pytest

import cairn


@pytest.fixture(autouse=True)
def default_log_after() -> object:
    yield None
    cairn.set_log(None)


def test_a_warning_at_open_reaches_the_function(tmp_path: Path) -> None:
    # A device cache that cannot be made (no GPU, or 1 TiB allocated at
    # once: more than any device's memory) is a warning, not an error: the
    # client opens host-only for device regions.
    seen: List[Tuple[int, str]] = []
    arrived = threading.Event()

    def record(level: int, message: str) -> None:
        seen.append((level, message))
        arrived.set()

    cairn.set_log(record)
    with cairn.Client(scratch_dir=tmp_path, host_cache="8MiB", block_size="1MiB", device_cache="1TiB", device_cache_init="direct"):
        assert arrived.wait(60), "no message arrived"
    cairn.set_log(None)  # returns once everything queued is delivered
    assert any(level == logging.WARNING and "device" in message for level, message in seen), seen


def test_messages_go_to_a_logger(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("cairn")
    cairn.set_log(lambda level, message: logger.log(level, message))
    with caplog.at_level(logging.INFO, logger="cairn"):
        with cairn.Client(scratch_dir=tmp_path, host_cache="8MiB", block_size="1MiB", device_cache="1TiB", device_cache_init="direct"):
            pass
        cairn.set_log(None)
    assert any(r.levelno == logging.WARNING and "device" in r.getMessage() for r in caplog.records)


def test_a_raising_function_does_not_break_the_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The exception is reported as unraisable (sys.unraisablehook), the
    # message dropped, and the client goes on.
    reported: List[BaseException] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_value))

    def bad(level: int, message: str) -> None:
        raise RuntimeError("the application's bug")

    cairn.set_log(bad)
    with cairn.Client(scratch_dir=tmp_path, host_cache="8MiB", block_size="1MiB", device_cache="1TiB", device_cache_init="direct") as c:
        c.stats()
    cairn.set_log(None)  # after every queued message was delivered
    assert any(isinstance(e, RuntimeError) and "application's bug" in str(e) for e in reported), reported


def test_set_log_rejects_what_it_cannot_call() -> None:
    with pytest.raises(TypeError):
        cairn.set_log(42)  # type: ignore[arg-type]
