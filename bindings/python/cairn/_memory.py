"""Tracked memory: numpy arrays in page-aligned memory from ``cairn_alloc``.

``checkpoint.changes = "pages"`` (or ``"auto"``) tracks writes page by page
only in page-aligned memory, which numpy's allocator does not promise; arrays
made here qualify. The memory goes back (``cairn_free``) when the last array
viewing it is gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence, Union

from . import _cairn

if TYPE_CHECKING:
    from numpy.typing import DTypeLike, NDArray

__all__ = ["alloc", "empty"]


def alloc(nbytes: int) -> "NDArray[Any]":
    """``nbytes`` zero-filled bytes of tracked memory as a 1-D uint8 numpy
    array (needs numpy).

    Raises:
        InvalidArgumentError: ``nbytes`` is 0.
        NoMemoryError: the mapping failed.
    """
    return _cairn.alloc(nbytes)  # type: ignore[no-any-return]


def empty(shape: Union[int, Sequence[int]], dtype: "DTypeLike" = "float64") -> "NDArray[Any]":
    """A zero-filled, C-contiguous array of ``shape`` and ``dtype`` in tracked
    memory (needs numpy), e.g. ``u = cairn.empty((4096, 4096))`` then
    ``client.protect(0, u)`` under ``changes="pages"``."""
    import numpy as np

    dt = np.dtype(dtype)
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    nbytes = int(np.prod(dims, dtype=np.int64)) * dt.itemsize
    raw = alloc(max(nbytes, 1))
    return raw[:nbytes].view(dt).reshape(dims)
