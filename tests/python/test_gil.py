"""Blocking calls release the GIL: another thread runs Python code meanwhile.

Not a timing test. The switch interval is raised to 100 s, so the main thread
never gives the GIL away on its own while it runs Python code; a spinner
thread that counts (sleeping briefly between counts, which lets the main
thread take the GIL back) can only advance while the main thread is inside a
call that released the GIL. Each call below must therefore see the count move.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable, Iterator

import numpy as np
import pytest

import cairn


class Spinner:
    """Counts in a thread while it holds the GIL."""

    def __init__(self) -> None:
        self.count = 0
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop:
            self.count += 1
            time.sleep(1e-4)  # releases the GIL

    def advanced_during(self, call: Callable[[], object]) -> int:
        before = self.count
        call()
        return self.count - before

    def advanced_during_some(self, call: Callable[[int], object], tries: int = 20,
                             before: Callable[[int], object] = lambda i: None) -> int:
        """Runs call(0), call(1), ... until the count moves during one of them;
        before(i) runs ahead of call(i), uncounted.

        A call copying from the cache lasts a few ms, and with both vCPUs
        copying the spinner may not be scheduled before it ends, GIL or not.
        Repeating does not weaken the test: between the calls the main thread
        runs Python code and never gives the GIL away, so only a call that
        released it can move the count.
        """
        for i in range(tries):
            before(i)
            moved = self.advanced_during(lambda: call(i))
            if moved > 0:
                return moved
        return 0


@pytest.fixture
def spinner() -> Iterator[Spinner]:
    old = sys.getswitchinterval()
    sys.setswitchinterval(100.0)
    s = Spinner()
    s.thread.start()
    try:
        yield s
    finally:
        s.stop = True
        sys.setswitchinterval(old)
        s.thread.join()


def test_blocking_calls_release_the_gil(make_client: Callable[..., cairn.Client], spinner: Spinner) -> None:
    big = np.ones(8 << 20)  # 64 MiB
    c = make_client(host_cache="160MiB", block_size="4MiB")
    c.protect(0, big)
    assert spinner.advanced_during(lambda: c.checkpoint("gil", 0)) > 0, "checkpoint"
    assert spinner.advanced_during(lambda: c.wait("gil", 0, "local")) > 0, "wait"
    assert spinner.advanced_during_some(lambda i: c.restore("gil", 0)) > 0, "restore"
    c.unprotect(0)
    with c.history("gil-h") as h:
        assert spinner.advanced_during_some(lambda i: h.push(i, big)) > 0, "push"
        assert spinner.advanced_during_some(lambda i: h.pop(100 + i, out=big),
                                            before=lambda i: h.push(100 + i, big)) > 0, "pop"
    assert spinner.advanced_during(lambda: c.save("gil-s", 0, {"big": big})) > 0, "save"
    assert spinner.advanced_during(c.close) > 0, "close"

    # A fresh client: latest checks the file's structure (a few KiB: short
    # calls, hence many tries), restore and restore_latest read it.
    c2 = make_client(host_cache="160MiB", block_size="4MiB")
    assert spinner.advanced_during_some(lambda i: c2.latest("gil"), tries=2000) > 0, "latest"
    c2.protect(0, big)
    assert spinner.advanced_during(lambda: c2.restore("gil", 0)) > 0, "restore from file"
    assert spinner.advanced_during_some(lambda i: c2.restore_latest("gil")) > 0, "restore_latest"
