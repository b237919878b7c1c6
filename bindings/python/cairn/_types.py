"""Type aliases for the memory Cairn accepts.

Cairn copies raw bytes, so any contiguous memory works: host memory through
the buffer protocol (numpy arrays, bytearray, memoryview, array.array, mmap),
CUDA device or managed memory through ``__cuda_array_interface__`` (CuPy,
numba, PyTorch CUDA tensors), and DLPack tensors on the CPU or a CUDA device
(PyTorch, JAX, ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Protocol, Tuple, Union

__all__ = ["ArrayLike", "SupportsCudaArrayInterface", "SupportsDLPack"]


class SupportsDLPack(Protocol):
    """An object that exports its memory through DLPack (``__dlpack__``)."""

    def __dlpack__(self) -> Any:
        """Returns a DLPack capsule of the object's memory."""

    def __dlpack_device__(self) -> Tuple[Any, int]:
        """Returns ``(device_type, device_id)``; 1 is the CPU, 2 a CUDA device,
        13 CUDA managed memory."""


class SupportsCudaArrayInterface(Protocol):
    """A CUDA array (CuPy, numba, torch): ``__cuda_array_interface__`` is a
    dict with ``shape``, ``typestr``, ``data = (pointer, read_only)`` and
    ``strides`` (None when C-contiguous); version 0 to 3."""

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        """The array's device memory and layout."""


if TYPE_CHECKING:
    from typing_extensions import Buffer, TypeAlias

    #: Contiguous memory: a buffer (numpy array, bytearray, memoryview), a CUDA
    #: array (CuPy, numba, torch CUDA tensor) or a DLPack tensor (torch).
    ArrayLike: TypeAlias = Union[Buffer, SupportsCudaArrayInterface, SupportsDLPack]
else:
    ArrayLike = Any
