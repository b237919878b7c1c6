"""cairn.History, the durability levels and what a client and a history
share (a context manager that closes)."""

from __future__ import annotations

import enum
from types import TracebackType
from typing import Optional, Type, TypeVar, Union, overload

from . import _cairn
from ._errors import InvalidArgumentError
from ._types import ArrayLike

__all__ = ["History", "Level", "LevelArg"]

_A = TypeVar("_A", bound=ArrayLike)


class Level(enum.IntEnum):
    """Where a version is durable (values match ``cairn_level_t``)."""

    CACHE = 0  #: captured into the host cache
    LOCAL = 1  #: committed to the local (scratch) directory
    PERSISTENT = 2  #: committed to the persistent directory


LevelArg = Union[Level, str]


def _level(level: LevelArg) -> int:
    if isinstance(level, Level):
        return int(level)
    if isinstance(level, str):
        try:
            return int(Level[level.upper()])
        except KeyError:
            pass
    raise InvalidArgumentError(
        f"unknown level {level!r}: use 'cache', 'local', 'persistent' or cairn.Level"
    )


_Self = TypeVar("_Self", bound="_Closable")


class _Closable:
    """A context manager whose exit calls :meth:`close`."""

    _closed: bool

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Releases the object's resources. Idempotent."""
        raise NotImplementedError

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()


class History(_Closable):
    """An adjoint history: steps pushed in a forward pass, popped (usually in
    reverse) in a backward pass. Made by :meth:`Client.history`.

    A popped step is consumed. Steps are ephemeral: closing the history drops
    the remaining ones (unless ``history_persistent=True``). Usable as a
    context manager (closes on exit). Close it before its client.
    """

    def __init__(self, impl: _cairn.History, name: str) -> None:
        self._impl = impl
        self._name = name
        self._closed = False

    @property
    def name(self) -> str:
        """The history's name."""
        return self._name

    def push(self, step: int, data: ArrayLike) -> None:
        """Copies ``data`` (any contiguous buffer, CUDA array or tensor,
        read-only is fine) as step ``step`` (>= 0). Returns once it is in the
        host cache (or the device cache, for device memory).

        Raises:
            ExistsError: the step was pushed already.
            StateError: the history or the client is closed.
        """
        self._impl.push(step, data)

    @overload
    def pop(self, step: int, out: None = None) -> bytearray: ...

    @overload
    def pop(self, step: int, out: _A) -> _A: ...

    def pop(self, step: int, out: Optional[ArrayLike] = None) -> Union[bytearray, ArrayLike]:
        """Copies step ``step`` into ``out`` and consumes it; returns ``out``.

        ``out`` is a writable contiguous buffer, CUDA array or tensor of at
        least the step's size (the first :meth:`step_size` bytes are written). Without
        ``out``, a new ``bytearray`` of the step's size is returned (view it
        with ``numpy.frombuffer(b, dtype)``). Prefetches the next lower steps.

        Raises:
            NotFoundError: no such step (never pushed, or already popped).
            SizeMismatchError: ``out`` is too small (the step is kept).
            StateError: the history or the client is closed.
        """
        if out is None:
            buf = bytearray(self._impl.step_size(step))
            self._impl.pop(step, buf)
            return buf
        self._impl.pop(step, out)
        return out

    def step_size(self, step: int) -> int:
        """Size in bytes of a step pushed and not popped yet.

        Raises:
            NotFoundError: no such step.
        """
        return self._impl.step_size(step)

    def close(self) -> None:
        """Drops every remaining step (deleting ephemeral files). Idempotent."""
        self._closed = True
        self._impl.close()

    def __repr__(self) -> str:
        return f"<cairn.History {self._name!r}{' closed' if self._closed else ''}>"
