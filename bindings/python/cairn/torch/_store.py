"""Where a DCP checkpoint lives in a Cairn directory, and one client per process.

Every rank of a job opens a client on the same root directory (Cairn's
``storage.scratch``; ``persistent_dir`` optional) and writes two kinds of
Cairn names there (docs/torch.md, "Layout"):

* ``<name>.rank<r>``: rank r's tensors. Each staged or written state dict is
  one version (1, 2, 3, ... per rank, not the DCP step): a mapping saved with
  :meth:`cairn.Client.save`, keys ``t0``, ``t1``, ... and ``packed``. The
  data version is decoupled from the step because ``async_save`` stages
  (captures) before DCP says which checkpoint id it is for.
* ``<name>.meta``: version = the step. The pickled DCP ``Metadata`` whose
  ``storage_data`` says, for every chunk, which rank's data version and key
  hold it (:class:`Location`). The coordinator writes it only after every
  rank's data is durable, so a step exists if and only if it is complete.

The steps of a root are the version files of ``<name>.meta`` (docs/format.md
3.1: ``v<20 digits>.cairn``) in the scratch and persistent directories.
"""

from __future__ import annotations

import os
import pickle
import re
import threading
from dataclasses import dataclass
from typing import Any, Dict, FrozenSet, List, Optional, Tuple, Union

from .._client import Client
from .._errors import Error, InvalidArgumentError

__all__ = ["Location", "Store", "is_step", "step_of"]

_VERSION_FILE = re.compile(r"^v(\d{20})\.cairn$")

# One client per (root, configuration) and process: the host cache is what
# makes a second save cheap, so a Writer or Reader made per save reuses it.
_clients: Dict[Tuple[str, Tuple[Tuple[str, str], ...]], Client] = {}
_clients_lock = threading.Lock()


class _Series:
    """What a process remembers of one checkpoint series between Writers:
    the next data version and the replicated keys another rank wrote last
    time (a Writer is often made per save, like FileSystemWriter); None
    before the first save."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.next_version: Optional[int] = None
        self.elsewhere: Optional[FrozenSet[str]] = None


_series: Dict[Tuple[int, str], _Series] = {}


@dataclass(frozen=True)
class Location:
    """Where one saved chunk is: in ``Metadata.storage_data`` per index.

    ``inline`` holds bytes items (and tensors DCP's planner made at write
    time, serialized with ``torch.save``) in the metadata itself; otherwise
    the chunk is the view ``(offset, size, stride)`` (in elements) of the
    captured tensor ``key`` (``shape``, ``dtype``) of data version
    ``version`` of rank ``rank``. Small tensors share one uint8 region
    (``view_dtype`` set, ``offset`` in bytes).
    """

    rank: int = -1
    version: int = 0
    key: str = ""
    shape: Tuple[int, ...] = ()
    dtype: Any = None
    offset: int = 0
    size: Tuple[int, ...] = ()
    stride: Tuple[int, ...] = ()
    inline: Optional[bytes] = None
    inline_tensor: bool = False
    view_dtype: Any = None  # packed: the bytes from ``offset`` are a tensor of this dtype

    def whole(self) -> bool:
        """The view is the whole captured tensor, in its own layout."""
        return (
            self.view_dtype is None
            and self.offset == 0
            and self.size == self.shape
            and self.stride == _contiguous(self.shape)
        )

    def view_of(self, base: Any) -> Any:
        """The chunk as a view of the restored captured tensor ``base``."""
        if self.view_dtype is None:
            return base.as_strided(self.size, self.stride, self.offset)
        itemsize = base.new_empty((), dtype=self.view_dtype).element_size()
        span = itemsize * (1 + sum((s - 1) * st for s, st in zip(self.size, self.stride)))
        return base[self.offset : self.offset + span].view(self.view_dtype).as_strided(self.size, self.stride)


def _contiguous(shape: Tuple[int, ...]) -> Tuple[int, ...]:
    out: List[int] = []
    acc = 1
    for d in reversed(shape):
        out.append(acc)
        acc *= max(d, 1)
    return tuple(reversed(out))


def step_of(checkpoint_id: Union[int, str, "os.PathLike[str]", None]) -> Optional[int]:
    """The step a DCP ``checkpoint_id`` names: an int >= 0 or its decimal
    string. Anything else is a clear error (a path is the root, given to the
    Writer or Reader, not a checkpoint id)."""
    if checkpoint_id is None:
        return None
    if isinstance(checkpoint_id, bool):
        raise InvalidArgumentError(f"checkpoint_id must be a step number, got {checkpoint_id!r}")
    if isinstance(checkpoint_id, int) and checkpoint_id >= 0:
        return checkpoint_id
    if isinstance(checkpoint_id, str) and checkpoint_id.isdigit():
        return int(checkpoint_id)
    raise InvalidArgumentError(
        f"checkpoint_id must be a step number (an int >= 0 or its decimal string), got "
        f"{checkpoint_id!r}: cairn.torch's root directory is given to Writer/Reader/Checkpointer"
    )


def is_step(checkpoint_id: object) -> bool:
    """Whether ``checkpoint_id`` names a step (DCP's validate_checkpoint_id)."""
    try:
        return step_of(checkpoint_id) is not None  # type: ignore[arg-type]
    except InvalidArgumentError:
        return False


def _rank() -> int:
    import torch.distributed as dist

    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


class Store:
    """One DCP root as Cairn names, and this process's client on it."""

    def __init__(self, target: Union[Client, str, "os.PathLike[str]"], name: str, client_kwargs: Dict[str, Any]):
        if not name or "/" in name or len(name) > 100:
            raise InvalidArgumentError(f"name must be 1 to 100 characters without '/', got {name!r}")
        self.name = name
        if isinstance(target, Client):
            if client_kwargs:
                raise InvalidArgumentError(
                    f"client keywords {sorted(client_kwargs)} given with an open client"
                )
            self.client = target
        else:
            self.client = _shared_client(os.fspath(target), client_kwargs)
        cfg = self.client.config
        self.dirs = [str(cfg["scratch_dir"])] + ([str(cfg["persistent_dir"])] if cfg["persistent_dir"] else [])
        self.level = "persistent" if cfg["persistent_dir"] else "local"
        self.rank = _rank()
        with _clients_lock:
            self.series = _series.setdefault((id(self.client), name), _Series())

    def data_name(self, rank: int) -> str:
        return f"{self.name}.rank{rank}"

    @property
    def meta_name(self) -> str:
        return f"{self.name}.meta"

    def next_data_version(self) -> int:
        """A new data version of this rank: one above any on disk or given."""
        series = self.series
        with series.lock:
            if series.next_version is None:
                series.next_version = self._newest_referenced() + 1
            v = series.next_version
            series.next_version += 1
            return v

    def _newest_referenced(self) -> int:
        """The newest data version of this rank that a committed step uses (0:
        none). A new process starts above it, not above the newest on disk:
        the data of a save that never got its step (a rank killed in
        between) is overwritten by the next save instead of counting
        towards ``keep_versions``, which would otherwise delete the data of
        the last complete step after two failed saves in a row."""
        newest = 0
        for step in self.steps():
            try:
                metadata = pickle.loads(self.load_blob(self.meta_name, step, "metadata"))
            except Error:
                continue  # a damaged step: the restore skips it too
            for loc in (getattr(metadata, "storage_data", None) or {}).values():
                if isinstance(loc, Location) and loc.rank == self.rank and loc.inline is None:
                    newest = max(newest, loc.version)
        return newest

    def steps(self) -> List[int]:
        """The steps whose metadata is committed, newest first."""
        found = set()
        for d in self.dirs:
            try:
                names = os.listdir(os.path.join(d, self.meta_name))
            except FileNotFoundError:
                continue
            for n in names:
                m = _VERSION_FILE.match(n)
                if m:
                    found.add(int(m.group(1)))
        return sorted(found, reverse=True)

    def load_blob(self, name: str, version: int, key: str) -> bytes:
        """The bytes of ``key`` of a mapping saved with Client.save, without
        numpy: sized from the version's manifest."""
        c = self.client
        label = f"version {version} of '{name}'"
        with c._lock, c._set_aside_protected():
            stored = c._manifest(name, version, label)
            if key not in stored:
                raise InvalidArgumentError(f"{label} has no '{key}'")
            buf = bytearray(stored[key].nbytes)
        c.load(name, version, {key: buf}, strict=False)
        return bytes(buf)

    def save_blob(self, name: str, version: int, key: str, blob: bytes) -> None:
        self.client.save(name, version, {key: bytearray(blob)}, changes="full")
        self.client.wait(name, version, self.level)


def _shared_client(root: str, kwargs: Dict[str, Any]) -> Client:
    # Zero-copy captures unless asked otherwise (the keyword or
    # $CAIRN_CAPTURE): staging then costs the write protection of the
    # tensors, not a copy of them, and a reader thread copies them into the
    # cache as they were (docs/torch.md, "Staging").
    if "capture" not in kwargs and "CAIRN_CAPTURE" not in os.environ:
        kwargs = dict(kwargs, capture="zero-copy")
    key = (os.path.realpath(root), tuple(sorted((k, repr(v)) for k, v in kwargs.items())))
    with _clients_lock:
        c = _clients.get(key)
        if c is None or c.closed:
            os.makedirs(root, exist_ok=True)
            c = _clients[key] = Client(scratch_dir=root, **kwargs)
        return c


def close_clients() -> None:
    """Closes the clients this module opened (at exit, and for tests)."""
    with _clients_lock:
        for c in _clients.values():
            c.close()
        _clients.clear()
        _series.clear()

