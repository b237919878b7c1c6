"""Type aliases for the memory Cairn accepts.

Cairn copies raw bytes, so any contiguous host memory works: objects with the
buffer protocol (numpy arrays, bytearray, memoryview, array.array, mmap) and
DLPack tensors (PyTorch CPU tensors, JAX CPU arrays, ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, Tuple, Union

__all__ = ["ArrayLike", "SupportsDLPack"]


class SupportsDLPack(Protocol):
    """An object that exports its memory through DLPack (``__dlpack__``)."""

    def __dlpack__(self) -> Any:
        """Returns a DLPack capsule of the object's memory."""

    def __dlpack_device__(self) -> Tuple[Any, int]:
        """Returns ``(device_type, device_id)``; 1 is the CPU."""


if TYPE_CHECKING:
    from typing_extensions import Buffer, TypeAlias

    #: Contiguous memory: a buffer (numpy array, bytearray, memoryview) or a
    #: DLPack tensor (torch CPU tensor).
    ArrayLike: TypeAlias = Union[Buffer, SupportsDLPack]
else:
    ArrayLike = Any
