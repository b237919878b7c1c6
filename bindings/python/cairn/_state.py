"""The layout of a mapping of arrays saved by :meth:`cairn.Client.save`.

A saved mapping is an ordinary checkpoint version with these regions:

* id 0: a 16-byte header: the magic ``b"CAIRNPY1"`` and the manifest's size
  (little-endian u64);
* id 1: the manifest, UTF-8 JSON::

      {"format": "cairn.python.state/1",
       "arrays": [{"key": "w", "id": 2, "dtype": "float32", "shape": [3, 4],
                   "nbytes": 48}, ...]}

* ids 2, 3, ...: the arrays' bytes, in sorted key order (so ids are stable
  for a given set of keys; the manifest is what :meth:`~cairn.Client.load`
  trusts).

:meth:`~cairn.Client.load` restores the header, then the manifest, checks
keys, dtypes and shapes against the arrays it is given, and only then
restores the data (so a mismatch never overwrites anything). Without
arrays to load into, it makes them from the manifest (:func:`allocate`).
"""

from __future__ import annotations

import json
import struct
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, NamedTuple, Tuple, Union

from ._errors import InvalidArgumentError, NotFoundError, SizeMismatchError, UnsupportedError
from ._types import ArrayLike

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = [
    "HEADER_ID", "MANIFEST_ID", "Entry", "describe", "encode", "decode", "header", "check",
    "allocate",
]  # fmt: skip

FORMAT = "cairn.python.state/1"
MAGIC = b"CAIRNPY1"
_HEADER = struct.Struct("<8sQ")
HEADER_ID = 0
MANIFEST_ID = 1
FIRST_ARRAY_ID = 2
HEADER_BYTES = _HEADER.size

# struct/buffer format characters -> numpy-style dtype names.
_FORMATS = {
    "B": "uint8", "b": "int8", "c": "uint8", "?": "bool",
    "h": "int16", "H": "uint16", "i": "int32", "I": "uint32",
    "l": "int64", "L": "uint64", "q": "int64", "Q": "uint64",
    "n": "int64", "N": "uint64",
    "e": "float16", "f": "float32", "d": "float64",
    "Zf": "complex64", "Zd": "complex128",
}  # fmt: skip


class Entry(NamedTuple):
    """One array of a saved mapping."""

    key: str
    id: int
    dtype: str
    shape: Tuple[int, ...]
    nbytes: int


# __cuda_array_interface__ typestr kinds -> numpy-style dtype name prefixes.
_KINDS = {"f": "float", "i": "int", "u": "uint", "c": "complex"}


def _cuda_describe(cai: Any) -> Tuple[str, Tuple[int, ...], int]:
    """``(dtype, shape, nbytes)`` from a ``__cuda_array_interface__`` dict."""
    try:
        typestr = str(cai["typestr"])
        shape = tuple(int(d) for d in cai["shape"])
        itemsize = int(typestr[2:])
    except (KeyError, TypeError, ValueError):
        raise InvalidArgumentError(f"malformed __cuda_array_interface__: {cai!r}") from None
    kind = typestr[1:2]
    if kind == "b" and itemsize == 1:
        name = "bool"
    elif kind in _KINDS:
        name = f"{_KINDS[kind]}{8 * itemsize}"
    else:
        name = f"typestr:{typestr}"
    count = 1
    for d in shape:
        count *= d
    return name, shape, count * itemsize


def describe(obj: ArrayLike) -> Tuple[str, Tuple[int, ...], int]:
    """``(dtype, shape, nbytes)`` of a numpy array, a torch tensor, a CUDA
    array or a buffer.

    dtype names are numpy's (``"float32"``); torch's ``torch.float32`` maps to
    the same name, so a mapping saved from numpy loads into torch and back (a
    CUDA array's typestr ``"<f4"`` too, so host and device arrays mix).
    """
    dtype = getattr(obj, "dtype", None)
    shape = getattr(obj, "shape", None)
    if dtype is not None and shape is not None:
        name = str(dtype)
        if name.startswith("torch."):
            name = name[len("torch.") :]
        dims = tuple(int(d) for d in shape)
        nbytes = getattr(obj, "nbytes", None)
        if not isinstance(nbytes, int):  # older torch: numel() * element_size()
            nbytes = int(obj.numel()) * int(obj.element_size())  # type: ignore[union-attr]
        return name, dims, nbytes
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return _cuda_describe(cai)
    try:
        view = memoryview(obj)  # type: ignore[arg-type]
    except TypeError:
        raise InvalidArgumentError(
            f"expected an array, a tensor or a buffer, got {type(obj).__name__}"
        ) from None
    with view:
        fmt = view.format.lstrip("@=<>!")
        return _FORMATS.get(fmt, f"format:{view.format}"), tuple(view.shape or ()), view.nbytes


def entries(arrays: Mapping[str, ArrayLike]) -> List[Entry]:
    """The entries of a mapping, ids assigned in sorted key order."""
    out = []
    for i, key in enumerate(sorted(arrays)):
        if not isinstance(key, str):
            raise InvalidArgumentError(f"keys must be str, got {type(key).__name__}: {key!r}")
        dtype, shape, nbytes = describe(arrays[key])
        out.append(Entry(key, FIRST_ARRAY_ID + i, dtype, shape, nbytes))
    return out


def encode(items: List[Entry]) -> Tuple[bytearray, bytearray]:
    """The header and manifest regions of a mapping's entries."""
    doc = {
        "format": FORMAT,
        "arrays": [
            {"key": e.key, "id": e.id, "dtype": e.dtype, "shape": list(e.shape), "nbytes": e.nbytes}
            for e in items
        ],
    }
    manifest = bytearray(json.dumps(doc, separators=(",", ":"), sort_keys=True).encode())
    return bytearray(_HEADER.pack(MAGIC, len(manifest))), manifest


def header(data: Union[bytes, bytearray], label: str) -> int:
    """The manifest size from a header region; raises if it is not one."""
    magic, size = _HEADER.unpack(bytes(data))
    if magic != MAGIC:
        raise InvalidArgumentError(f"{label} was not written by Client.save() (bad magic {magic!r})")
    return int(size)


def decode(data: Union[bytes, bytearray], label: str) -> Dict[str, Entry]:
    """The entries of a manifest region, by key."""
    try:
        doc: Any = json.loads(bytes(data).decode())
        if doc.get("format") != FORMAT:
            raise InvalidArgumentError(
                f"{label}: manifest format {doc.get('format')!r} is not {FORMAT!r}"
            )
        return {
            a["key"]: Entry(a["key"], int(a["id"]), a["dtype"], tuple(a["shape"]), int(a["nbytes"]))
            for a in doc["arrays"]
        }
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise InvalidArgumentError(f"{label}: unreadable manifest: {e}") from None


def _spec(dtype: str, shape: Tuple[int, ...]) -> str:
    return f"{dtype}{list(shape)}"


def check(stored: Dict[str, Entry], into: List[Entry], strict: bool, label: str) -> None:
    """Checks ``into`` against a manifest: every key present, same dtype and
    shape; with ``strict``, no key of the checkpoint left out.

    Raises:
        SizeMismatchError: a dtype or shape differs (keys problems listed too).
        NotFoundError: keys differ.
    """
    problems = []
    wanted = {e.key for e in into}
    missing = sorted(wanted - set(stored))
    if missing:
        problems.append(f"not in the checkpoint: {', '.join(map(repr, missing))}")
    extra = sorted(set(stored) - wanted)
    if extra and strict:
        problems.append(
            f"in the checkpoint but not in `into` (pass strict=False to skip them): "
            f"{', '.join(map(repr, extra))}"
        )
    differ = [
        f"{e.key!r}: checkpoint has {_spec(stored[e.key].dtype, stored[e.key].shape)}, "
        f"`into` has {_spec(e.dtype, e.shape)}"
        for e in into
        if e.key in stored and (stored[e.key].dtype, stored[e.key].shape) != (e.dtype, e.shape)
    ]
    if differ:
        problems.append("dtype or shape differs: " + "; ".join(differ))
    if problems:
        cls = SizeMismatchError if differ else NotFoundError
        raise cls(f"cannot load {label}: " + "; ".join(problems))


def allocate(stored: Dict[str, Entry], label: str) -> Dict[str, "NDArray[Any]"]:
    """New numpy arrays for a manifest's entries, by key in sorted order, each
    with the saved dtype and shape (numpy is imported here: only this needs it).

    Raises:
        ImportError: numpy is not installed.
        UnsupportedError: numpy has no dtype of a saved name (keys listed).
        InvalidArgumentError: an entry's byte size does not match its dtype and shape.
    """
    try:
        import numpy
    except ImportError as err:
        raise ImportError(
            f"Client.load() without into= returns numpy arrays and needs numpy ({err}); "
            "install numpy, or pass into= with arrays of your own"
        ) from None
    out: Dict[str, "NDArray[Any]"] = {}
    unknown = []
    for key in sorted(stored):
        entry = stored[key]
        try:
            dtype = numpy.dtype(entry.dtype)
        except TypeError:
            unknown.append(f"{key!r} ({entry.dtype})")
            continue
        array = numpy.empty(entry.shape, dtype)
        if array.nbytes != entry.nbytes:
            raise InvalidArgumentError(
                f"{label}: the manifest gives {key!r} {entry.nbytes} bytes, but "
                f"{_spec(entry.dtype, entry.shape)} is {array.nbytes} bytes"
            )
        out[key] = array
    if unknown:
        raise UnsupportedError(
            f"cannot load {label} into new numpy arrays: numpy has no dtype for "
            f"{', '.join(unknown)}; pass into= with arrays of that type (e.g. torch tensors)"
        )
    return out
