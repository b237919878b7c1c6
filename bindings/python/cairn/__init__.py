"""Cairn: asynchronous multi-level checkpoint/restart, from Python.

    import numpy as np
    import cairn

    u = np.zeros((1024, 1024))
    with cairn.Client(scratch_dir="/tmp/ckpt", host_cache="1GiB") as client:
        client.protect(0, u)
        start = client.latest("sim")             # newest version that verifies, or None
        if start is not None:
            client.restore("sim", start)         # resume: copies it back into u
        for step in range((start or 0) + 1, 100):
            ...                                  # compute into u
            client.checkpoint("sim", step)       # returns once u is in the cache

See docs/python.md for the whole API: histories (:meth:`Client.history`),
mappings of arrays (:meth:`Client.save` / :meth:`Client.load`), statistics
and errors.
"""

from __future__ import annotations

import atexit as _atexit

from ._cairn import format_size, parse_size, set_log

# A log function is a Python object called from the extension's own thread:
# put the default back before the interpreter goes, so that no message is
# delivered into a finalizing interpreter.
_atexit.register(set_log, None)
from ._memory import alloc, empty
from ._client import (
    ChangeMode,
    Client,
    DeviceCacheInit,
    InitStrategy,
)
from ._history import History, Level
from ._stats import (
    ChangeStats,
    DeviceStats,
    InitStats,
    IntervalStats,
    MpiStats,
    Stats,
    TierStats,
    ZeroCopyStats,
)
from ._errors import (
    ConfigError,
    CorruptError,
    Error,
    ExistsError,
    InternalError,
    InvalidArgumentError,
    IoError,
    NoMemoryError,
    NoSpaceError,
    NotFoundError,
    SizeMismatchError,
    StateError,
    UnsupportedError,
    error_class,
)
from ._types import ArrayLike, SupportsCudaArrayInterface, SupportsDLPack

__version__ = "0.1.0"

__all__ = [
    "set_log",
    "ArrayLike",
    "ChangeMode",
    "ChangeStats",
    "ZeroCopyStats",
    "IntervalStats",
    "Client",
    "ConfigError",
    "CorruptError",
    "DeviceCacheInit",
    "DeviceStats",
    "Error",
    "ExistsError",
    "History",
    "InitStats",
    "InitStrategy",
    "InternalError",
    "InvalidArgumentError",
    "IoError",
    "Level",
    "MpiStats",
    "NoMemoryError",
    "NoSpaceError",
    "NotFoundError",
    "SizeMismatchError",
    "StateError",
    "Stats",
    "SupportsCudaArrayInterface",
    "SupportsDLPack",
    "TierStats",
    "UnsupportedError",
    "error_class",
    "alloc",
    "empty",
    "format_size",
    "parse_size",
]
