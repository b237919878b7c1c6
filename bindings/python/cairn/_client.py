"""cairn.Client and cairn.History: the Python face of the C++ API."""

from __future__ import annotations

import contextlib
import enum
import importlib
import os
import threading
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    Iterator,
    List,
    Mapping,
    NoReturn,
    Optional,
    Tuple,
    Type,
    TypeVar,
    Union,
    overload,
)

from . import _cairn, _config, _state
from ._errors import (
    Error,
    InvalidArgumentError,
    NotFoundError,
    SizeMismatchError,
    StateError,
    UnsupportedError,
)
from ._enums import CaptureMode, ChangeMode, DeviceCacheInit, InitStrategy, WriteProtectMode
from ._stats import Stats
from ._types import ArrayLike

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = [
    "ChangeMode",
    "Client",
    "DeviceCacheInit",
    "History",
    "InitStrategy",
    "Level",
]

PathArg = Union[str, "os.PathLike[str]"]
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



def _open_mpi(comm: Any, config: Optional[PathArg], overrides: Mapping[str, object]) -> _cairn.Client:
    """The extension's client opened over an mpi4py communicator (collective;
    docs/python.md, "MPI"). The communicator goes to libcairn_mpi as its
    Fortran handle (``comm.py2f()``); libcairn_mpi is loaded at run time from
    ``$CAIRN_MPI_LIBRARY`` or by its soname, so that neither mpi4py nor MPI is
    needed by ``import cairn``. A configuration that does not load on this
    rank still takes part in the open, so that every rank fails alike."""
    try:
        # Imported by name: mpi4py is optional, also for type checkers.
        MPI: Any = importlib.import_module("mpi4py.MPI")
    except ImportError as e:
        raise UnsupportedError(
            "cairn.Client(comm=...) needs mpi4py, which is not installed "
            "(pip install mpi4py, built against the MPI that runs the job)"
        ) from e
    if not isinstance(comm, MPI.Comm):
        raise InvalidArgumentError(f"comm must be an mpi4py communicator (mpi4py.MPI.Comm), not {type(comm).__name__}")
    if comm == MPI.COMM_NULL:
        raise InvalidArgumentError("comm is MPI.COMM_NULL")
    config_obj: Optional[_cairn.Config] = None
    code, message = 0, ""
    try:
        config_obj = _config.load(config, overrides)
    except Error as e:
        code, message = e.code, e.message
    library = os.environ.get("CAIRN_MPI_LIBRARY") or "libcairn_mpi.so.0"
    return _cairn.Client.open_mpi(config_obj, code, message, comm.py2f(), library)


class Client(_Closable):
    """A Cairn client: protects memory regions and checkpoints them
    asynchronously through the host cache to the scratch (and persistent)
    directory.

    ``config`` is a TOML file (docs/config.md) or None for the defaults (or
    ``$CAIRN_CONFIG``); ``CAIRN_*`` environment variables come next, and the
    keyword arguments last (they win over both). Every keyword is optional,
    and is the key of docs/config.md (its type, default and meaning) named in
    this table:

    .. BEGIN generated by cairn_schema_gen from include/cairn/config_keys.def: keyword table
    ============================  ================================================
    keyword                       key (docs/config.md: type, default, meaning)
    ============================  ================================================
    ``scratch_dir``               ``storage.scratch``, ``$CAIRN_SCRATCH``
    ``persistent_dir``            ``storage.persistent``, ``$CAIRN_PERSISTENT``
    ``persist_from_cache``        ``storage.persist_from_cache``, ``$CAIRN_PERSIST_FROM_CACHE``
    ``file_mode``                 ``storage.file_mode``, ``$CAIRN_FILE_MODE``
    ``direct_io``                 ``storage.direct_io``, ``$CAIRN_DIRECT_IO``
    ``fsync``                     ``storage.fsync``, ``$CAIRN_FSYNC``
    ``host_cache``                ``host_cache.size``, ``$CAIRN_HOST_CACHE``
    ``host_cache_grow``           ``host_cache.grow``, ``$CAIRN_HOST_CACHE_GROW``
    ``block_size``                ``host_cache.block_size``, ``$CAIRN_BLOCK_SIZE``
    ``copy_threads``              ``host_cache.copy_threads``, ``$CAIRN_COPY_THREADS``
    ``init``                      ``host_cache.init``, ``$CAIRN_HOST_CACHE_INIT``
    ``huge_pages``                ``host_cache.huge_pages``, ``$CAIRN_HUGE_PAGES``
    ``pin``                       ``host_cache.pin``, ``$CAIRN_PIN``
    ``pin_serialize``             ``host_cache.pin_serialize``
    ``pin_lock``                  ``host_cache.pin_lock``
    ``host_cache_numa``           ``host_cache.numa``, ``$CAIRN_HOST_CACHE_NUMA``
    ``device_cache``              ``device_cache.size``, ``$CAIRN_DEVICE_CACHE``
    ``device_cache_init``         ``device_cache.init``, ``$CAIRN_DEVICE_CACHE_INIT``
    ``device_map_chunk``          ``device_cache.map_chunk``
    ``device``                    ``device_cache.device``, ``$CAIRN_DEVICE``
    ``bounce_buffers``            ``device_cache.bounce_buffers``
    ``keep_versions``             ``retention.keep_versions``, ``$CAIRN_KEEP``
    ``changes``                   ``checkpoint.changes``, ``$CAIRN_CHANGES``
    ``max_layers``                ``checkpoint.max_layers``, ``$CAIRN_MAX_LAYERS``
    ``hash_chunk``                ``checkpoint.hash_chunk``, ``$CAIRN_HASH_CHUNK``
    ``prefetch_depth``            ``history.prefetch_depth``, ``$CAIRN_PREFETCH_DEPTH``
    ``history_persistent``        ``history.persistent``
    ``trace_path``                ``trace.path``, ``$CAIRN_TRACE``
    ``record_placement``          ``checkpoint.record_placement``, ``$CAIRN_RECORD_PLACEMENT``
    ``placement``                 ``restart.placement``, ``$CAIRN_PLACEMENT``
    ``capture``                   ``checkpoint.capture``, ``$CAIRN_CAPTURE``
    ``cow_fraction``              ``checkpoint.cow_fraction``, ``$CAIRN_COW``
    ``zero_copy_order``           ``checkpoint.zero_copy_order``, ``$CAIRN_ZERO_COPY_ORDER``
    ``write_protect``             ``checkpoint.write_protect``, ``$CAIRN_WRITE_PROTECT``
    ``mtbf_s``                    ``checkpoint.mtbf_s``, ``$CAIRN_MTBF``
    ``l2_every``                  ``mpi.l2_every``, ``$CAIRN_L2_EVERY``
    ``l3_every``                  ``mpi.l3_every``, ``$CAIRN_L3_EVERY``
    ``l3_group``                  ``mpi.l3_group``, ``$CAIRN_L3_GROUP``
    ``l4_every``                  ``mpi.l4_every``, ``$CAIRN_L4_EVERY``
    ``progress_thread``           ``mpi.progress_thread``, ``$CAIRN_MPI_PROGRESS_THREAD``
    ``ranks_per_node``            ``mpi.ranks_per_node``, ``$CAIRN_MPI_RANKS_PER_NODE``
    ============================  ================================================
    .. END generated

    ``comm`` (an mpi4py communicator, e.g. ``MPI.COMM_WORLD``) opens the
    client on every rank of it, collectively (``cairn_open_mpi``,
    docs/mpi.md): each rank uses its own subdirectories, :meth:`checkpoint`
    stays local, and :meth:`wait`, :meth:`latest`, :meth:`restore` and
    :meth:`restore_latest` become collective (every rank calls them in the
    same order). It needs mpi4py and libcairn_mpi (Cairn built with MPI;
    ``$CAIRN_MPI_LIBRARY`` names it if it is not on the library path);
    without them it raises :class:`UnsupportedError`.

    A client is a context manager: leaving the ``with`` block calls
    :meth:`close`, which drains pending flushes. Every method may be called
    from any thread; blocking calls release the GIL.

    Raises:
        ConfigError: unknown keyword (named in the message), bad value, bad file.
        NoMemoryError: the host cache could not be allocated.
    """

    def __init__(
        self,
        config: Optional[PathArg] = None,
        /,
        *,
        # BEGIN generated by cairn_schema_gen from include/cairn/config_keys.def: keywords
        scratch_dir: Optional[PathArg] = None,
        persistent_dir: Optional[PathArg] = None,
        persist_from_cache: Optional[bool] = None,
        file_mode: Union[int, str, None] = None,
        direct_io: Optional[bool] = None,
        fsync: Optional[bool] = None,
        host_cache: Union[int, str, None] = None,
        host_cache_grow: Optional[bool] = None,
        block_size: Union[int, str, None] = None,
        copy_threads: Optional[int] = None,
        init: Optional[InitStrategy] = None,
        huge_pages: Optional[bool] = None,
        pin: Optional[bool] = None,
        pin_serialize: Optional[bool] = None,
        pin_lock: Optional[PathArg] = None,
        host_cache_numa: Optional[str] = None,
        device_cache: Union[int, str, None] = None,
        device_cache_init: Optional[DeviceCacheInit] = None,
        device_map_chunk: Union[int, str, None] = None,
        device: Optional[int] = None,
        bounce_buffers: Optional[int] = None,
        keep_versions: Optional[int] = None,
        changes: Optional[ChangeMode] = None,
        max_layers: Optional[int] = None,
        hash_chunk: Union[int, str, None] = None,
        prefetch_depth: Optional[int] = None,
        history_persistent: Optional[bool] = None,
        trace_path: Optional[PathArg] = None,
        record_placement: Optional[bool] = None,
        placement: Optional[str] = None,
        capture: Optional[CaptureMode] = None,
        cow_fraction: Optional[float] = None,
        zero_copy_order: Optional[str] = None,
        write_protect: Optional[WriteProtectMode] = None,
        mtbf_s: Optional[float] = None,
        l2_every: Optional[int] = None,
        l3_every: Optional[int] = None,
        l3_group: Optional[int] = None,
        l4_every: Optional[int] = None,
        progress_thread: Optional[bool] = None,
        ranks_per_node: Optional[int] = None,
        # END generated
        comm: Any = None,
        **unknown: NoReturn,
    ) -> None:
        # The keyword parameters, by name (the same names as _config.KEYS).
        given = locals()
        overrides: Dict[str, object] = {
            k: given[k] for k in _config.KEYS if given[k] is not None
        }
        overrides.update(unknown)  # rejected by name in _config.load
        if comm is None:
            self._impl = _cairn.Client(_config.load(config, overrides))
        else:
            self._impl = _open_mpi(comm, config, overrides)
        self._lock = threading.RLock()  # protect/save/load bookkeeping
        self._protected: Dict[int, Tuple[object, Optional[str]]] = {}  # id -> (obj, changes)
        # Zero-copy: the objects the last checkpoint reads after its call
        # returned (docs/design.md, "Zero-copy captures"), kept alive until the
        # next checkpoint call, which waits for that read, or close.
        self._zero_copy = self._impl.config().capture == "zero-copy"
        self._in_capture: List[object] = []
        self._closed = False

    # -- lifecycle -----------------------------------------------------------

    def close(self) -> None:
        """Drains pending flushes, stops the background threads and releases
        the host cache and every protected object. Idempotent.

        Raises:
            Error: the first flush error not reported yet by :meth:`wait`
            (the client is closed all the same).
        """
        with self._lock:
            self._closed = True
            self._protected.clear()
            self._impl.close()
            self._in_capture = []

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"scratch_dir={self._impl.config().scratch_dir!r}"
        return f"<cairn.Client {state}>"

    @property
    def config(self) -> Dict[str, object]:
        """The effective configuration, by the keyword names of :class:`Client`
        (sizes in bytes)."""
        return _config.to_dict(self._impl.config())

    # -- regions and versions ------------------------------------------------

    def protect(self, id: int, obj: ArrayLike, *, changes: Optional[ChangeMode] = None) -> None:
        """Registers ``obj``'s memory as region ``id`` (any int; re-protecting
        an id replaces it).

        ``obj`` is a writable, contiguous buffer (numpy array, bytearray,
        memoryview, ...), a CUDA array (``__cuda_array_interface__``: CuPy,
        numba, torch CUDA tensors) or a DLPack tensor on the CPU or a CUDA
        device (torch). Device and managed memory go through the GPU tier
        (docs/gpu.md): Cairn copies it on its own streams, so finish the
        device work that writes it before :meth:`checkpoint` (e.g.
        ``torch.cuda.synchronize()``), as for host memory. The client keeps a
        reference to it until :meth:`unprotect` or :meth:`close`, and holds its
        buffer export (so a bytearray or numpy array cannot be resized).

        ``changes`` overrides the client's ``checkpoint.changes`` for this
        region (``"full"``, ``"hash"``, ``"pages"``, ``"auto"``; None: the
        client's), e.g. ``"hash"`` for an array whose memory cannot be
        tracked page by page. Re-protecting with another mode makes the
        region's next version full.

        Raises:
            InvalidArgumentError: read-only, non-contiguous or not a buffer;
                an unknown ``changes``.
            UnsupportedError: memory of another device (DLPack ROCm, ...).
        """
        with self._lock:
            self._impl.protect(id, obj, True, changes)
            self._protected[id] = (obj, changes)

    def unprotect(self, id: int) -> None:
        """Forgets region ``id`` and drops the reference to its object (after
        any checkpoint or restore using it has finished).

        Raises:
            NotFoundError: ``id`` is not protected.
        """
        with self._lock:
            self._impl.unprotect(id, wait=False)
            obj = self._protected.pop(id, None)
            if self._zero_copy and obj is not None:
                self._in_capture.append(obj)  # a checkpoint in flight may still read it

    def checkpoint(self, name: str, version: int) -> None:
        """Captures every protected region as ``version`` (>= 0) of ``name``.

        Returns once the data is in the host cache: the arrays may be modified
        right away. Flushing to the directories continues in the background;
        :meth:`wait` blocks until it is durable. With ``capture="zero-copy"``
        it returns once the memory is write-protected, and a background
        thread reads it as it was at the call; the client keeps the objects
        alive until the next checkpoint call (which waits for that read), even
        if they are unprotected meanwhile, or :meth:`close`.

        Raises:
            ExistsError: that version is still in this client's pipeline.
            InvalidArgumentError: bad name (1-128 chars, no '/', no '..').
        """
        with self._lock:
            self._impl.checkpoint(name, version)
            if self._zero_copy:  # read until the next call; the last call's are not any more
                self._in_capture = [obj for obj, _ in self._protected.values()]

    def checkpoint_due(self, name: str) -> bool:
        """Whether a checkpoint of ``name`` is due under the optimal interval
        (``cairn_checkpoint_due``; docs/design.md "When to checkpoint"):
        True before this client's first checkpoint of ``name`` (it measures
        the cost), then once T = max(C, sqrt(2 C (MTBF - R))) has passed
        since the last one returned (or the last :meth:`wait` on it). C: the
        median blocking time of its last 5 checkpoints (each call plus the
        waits on its version), R: its last restore's time (else estimated
        from its bytes), MTBF: the ``mtbf_s`` keyword (``checkpoint.mtbf_s``,
        ``$CAIRN_MTBF``). With ``comm``: collective, True on every rank when
        it is True on any. :attr:`stats` ``.interval`` shows the decision.

        Raises:
            ConfigError: no MTBF is configured.
        """
        return self._impl.checkpoint_due(name)

    def wait(self, name: str, version: int, level: LevelArg = "local") -> None:
        """Blocks until ``version`` of ``name`` is durable at ``level``:
        ``"cache"``, ``"local"`` (the default) or ``"persistent"``.

        Raises:
            IoError, NoSpaceError: the flush failed.
            InvalidArgumentError: ``"persistent"`` with no persistent directory.
        """
        self._impl.wait(name, version, _level(level))

    def latest(self, name: str) -> Optional[int]:
        """The newest committed version of ``name`` whose file's structure
        checks out (header, footer, tables and their checksums; such damage
        is skipped), or ``None`` if there is none.

        Reads the local and persistent directories, so it also finds versions
        written by an earlier process. The data is not read here: the restore
        verifies it (:meth:`restore_latest` falls back on its own).
        """
        return self._impl.latest(name)

    def restore(self, name: str, version: int, *, shared_on_node: bool = False) -> None:
        """Copies ``version`` of ``name`` into the protected regions (same ids
        and sizes), from the cache when resident, else from the files,
        verifying every block's checksum.

        ``shared_on_node=True``: other processes of this node read the same
        version at about the same time (every rank loading a replicated
        model), so its files are read through the page cache and come off
        the disk once for all of them. The default reads them as they were
        written (O_DIRECT under ``storage.direct_io``), faster for one reader.

        Raises:
            NotFoundError: no such version, or a protected id not in it.
            SizeMismatchError: a region's size differs.
            CorruptError: the data failed verification (use :meth:`latest`).
        """
        with self._lock:
            self._impl.restore(name, version, shared_on_node)

    #: The index under which the thread that called :meth:`checkpoint` is
    #: recorded (``CAIRN_CHECKPOINTING_THREAD``).
    CHECKPOINTING_THREAD = -1

    def register_thread(self, index: int) -> None:
        """Remembers the calling thread under ``index`` (>= 0, e.g. a worker's
        number) so that later checkpoints record its CPU affinity;
        registering an index again replaces its thread. A thread that has
        exited by a checkpoint is left out of it (docs/design.md,
        "Placement").

        Raises:
            InvalidArgumentError: ``index`` is negative.
        """
        self._impl.register_thread(index)

    def restore_affinity(self, index: int = CHECKPOINTING_THREAD) -> None:
        """Sets the calling thread's CPU affinity to the one recorded under
        ``index`` (:attr:`CHECKPOINTING_THREAD` or a registered index) in the
        version last restored by this client; CPUs this machine lacks are
        wrapped around its CPUs. Does nothing with ``placement="keep"``.

        Raises:
            StateError: no version with a placement record was restored.
            NotFoundError: the version recorded no such index.
        """
        self._impl.restore_affinity(index)

    def begin_restore(self) -> None:
        """Begins a restore made of several calls (a framework's load: it
        reads its own metadata, plans, then restores the data): until
        :meth:`end_restore`, the application counts as waiting on a restore,
        as it does inside :meth:`restore`, so the host cache's background
        preparation (``host_cache_init``) pauses instead of taking the cores
        and the memory bandwidth the load needs (``stats().init.restores_now``
        counts them). They nest; :meth:`close` ends those left open.
        :meth:`restoring` is the same as a ``with`` block."""
        self._impl.begin_restore()

    def end_restore(self) -> None:
        """Ends the newest :meth:`begin_restore`.

        Raises:
            StateError: none is open.
        """
        self._impl.end_restore()

    @contextlib.contextmanager
    def restoring(self) -> Iterator[None]:
        """``with client.restoring(): ...``: :meth:`begin_restore` on entry,
        :meth:`end_restore` on exit."""
        self.begin_restore()
        try:
            yield
        finally:
            self.end_restore()

    def restore_latest(self, name: str) -> Optional[int]:
        """The restart in one pass: restores the newest committed version of
        ``name`` that verifies into the protected regions and returns its
        number, reading each byte once; ``None`` if there is no committed
        version, or none that verifies.

        A version found damaged part-way has already overwritten part of the
        regions: the next older version is restored into the same regions,
        and so on. On success they hold exactly the returned version; on
        ``None`` after damage they hold partial data.

        Raises:
            SizeMismatchError: a region's size differs from the newest version.
        """
        with self._lock:
            return self._impl.restore_latest(name)

    def saved_latest(self, name: str) -> Optional[Tuple[int, int]]:
        """``(version, nranks)``: the newest version of ``name`` that every
        rank of the MPI job that saved it (under this client's storage roots)
        committed globally and whose files check out, and that job's number
        of ranks; ``None`` if there is none. For reading a saved MPI job from
        another number of processes, or from a serial tool (docs/mpi.md,
        "Restarting on another number of ranks"); this client checks every
        saved rank itself.
        """
        return self._impl.saved_latest(name)

    def saved_ranks(self, name: str, version: int) -> int:
        """The saved job's number of ranks, once every saved rank is found to
        have ``version`` globally committed and its file intact.

        Raises:
            NotFoundError: a saved rank lacks it (named), or no MPI job saved
                ``name``.
        """
        return self._impl.saved_ranks(name, version)

    def saved_region_size(self, name: str, version: int, saved_rank: int, region: int) -> int:
        """The size in bytes of region ``region`` of saved rank
        ``saved_rank``'s ``version``."""
        return self._impl.saved_region_size(name, version, saved_rank, region)

    def read_saved_region(
        self, name: str, version: int, saved_rank: int, region: int, out: Any, offset: int = 0
    ) -> None:
        """Copies bytes ``[offset, offset + nbytes(out))`` of region
        ``region`` of saved rank ``saved_rank``'s ``version`` into the
        writable host buffer ``out`` (numpy array, bytearray, ...), verifying
        every block's checksum (the local copy first, else the persistent one).

        Raises:
            InvalidArgumentError: no such saved rank or region id, or the
                window passes the region's end.
            NotFoundError: the version is not globally committed (or absent).
            CorruptError: no copy verifies.
        """
        self._impl.read_saved_region(name, version, saved_rank, region, out, offset)

    def history(self, name: str) -> History:
        """Opens the adjoint history ``name`` (see :class:`History`).

        Raises:
            StateError: a history of that name is open already.
        """
        return History(self._impl.open_history(name), name)

    def stats(self) -> Stats:
        """A snapshot of the pipeline statistics."""
        return Stats._from_dict(self._impl.stats())

    # -- mappings of arrays --------------------------------------------------

    def save(
        self, name: str, version: int, arrays: Mapping[str, ArrayLike], *, changes: Optional[ChangeMode] = "hash"
    ) -> None:
        """Checkpoints a mapping of arrays (e.g. a model's ``state_dict()``) as
        ``version`` of ``name``, with a manifest of its keys, dtypes and
        shapes. Returns once captured (like :meth:`checkpoint`); use
        :meth:`wait` for durability. Read-only arrays are fine.

        Regions registered with :meth:`protect` are not part of it: they are
        set aside for the call and registered again afterwards.

        ``changes`` is the arrays' change detection (default ``"hash"``: a
        version stores only the 64 KiB chunks that changed since the previous
        committed ``save`` of ``name``, layered on it; None: the client's
        ``checkpoint.changes``; ``"full"``: everything every time).

        Raises:
            InvalidArgumentError: a key is not a str, or a value is not an
                array (or not contiguous).
        """
        with self._lock, self._set_aside_protected():
            items = _state.entries(arrays)
            head, manifest = _state.encode(items)
            regions: Dict[int, ArrayLike] = {_state.HEADER_ID: head, _state.MANIFEST_ID: manifest}
            regions.update((e.id, arrays[e.key]) for e in items)
            with self._regions(regions, writable=False, changes=changes):
                self._impl.checkpoint(name, version)
            if self._zero_copy:  # read until the next checkpoint call
                self._in_capture = list(regions.values())

    @overload
    def load(
        self,
        name: str,
        version: int,
        into: None = None,
        *,
        strict: bool = True,
        shared_on_node: bool = False,
    ) -> Dict[str, "NDArray[Any]"]: ...

    @overload
    def load(
        self,
        name: str,
        version: int,
        into: Mapping[str, ArrayLike],
        *,
        strict: bool = True,
        shared_on_node: bool = False,
    ) -> Mapping[str, ArrayLike]: ...

    def load(
        self,
        name: str,
        version: int,
        into: Optional[Mapping[str, ArrayLike]] = None,
        *,
        strict: bool = True,
        shared_on_node: bool = False,
    ) -> Union[Dict[str, "NDArray[Any]"], Mapping[str, ArrayLike]]:
        """Loads ``version`` of ``name`` written by :meth:`save`.

        Without ``into``: returns a new dict of new numpy arrays, one per
        saved key (in sorted key order), each with the dtype and shape it was
        saved with (a bytearray or other buffer comes back as the uint8 or
        other array its buffer format describes). Needs numpy.

        With ``into``: fills the existing arrays of ``into`` (same keys,
        dtypes and shapes; numpy, torch, CUDA arrays, buffers) and returns
        ``into``. The manifest is checked before any data is copied, so a
        mismatch leaves ``into`` untouched. With ``strict=False``, keys of the
        checkpoint that ``into`` lacks are skipped. ``shared_on_node`` as for
        :meth:`restore`.

        Regions registered with :meth:`protect` are left alone.

        Raises:
            SizeMismatchError: a dtype or shape differs (every mismatch is listed).
            NotFoundError: no such version, or keys differ (listed).
            InvalidArgumentError: the version was not written by :meth:`save`.
            UnsupportedError: without ``into``, a saved dtype numpy lacks
                (e.g. torch's bfloat16; those keys are listed).
            CorruptError: the data failed verification.
            ImportError: without ``into``, numpy is not installed.
        """
        label = f"version {version} of '{name}'"
        with self._lock, self._set_aside_protected():
            stored = self._manifest(name, version, label)
            result: Union[Dict[str, "NDArray[Any]"], Mapping[str, ArrayLike]]
            if into is None:
                result = arrays = _state.allocate(stored, label)
                regions: Dict[int, ArrayLike] = {stored[k].id: a for k, a in arrays.items()}
            else:
                result = into
                wanted = _state.entries(into)
                _state.check(stored, wanted, strict, label)
                regions = {stored[e.key].id: into[e.key] for e in wanted}
            with self._regions(regions, writable=True):
                self._impl.restore(name, version, shared_on_node)
        return result

    def _manifest(self, name: str, version: int, label: str) -> Dict[str, _state.Entry]:
        """The manifest of a version written by :meth:`save` (lock held,
        protect()ed regions set aside): its header, then the manifest."""
        head = bytearray(_state.HEADER_BYTES)
        try:
            with self._regions({_state.HEADER_ID: head}, writable=True):
                self._impl.restore(name, version)
        except (SizeMismatchError, NotFoundError) as e:
            if isinstance(e, NotFoundError) and not e.message.startswith("region "):
                raise  # no such version
            raise InvalidArgumentError(
                f"{label} was not written by Client.save(): {e.message}"
            ) from None
        manifest = bytearray(_state.header(head, label))
        with self._regions({_state.MANIFEST_ID: manifest}, writable=True):
            self._impl.restore(name, version)
        return _state.decode(manifest, label)

    @contextlib.contextmanager
    def _set_aside_protected(self) -> Iterator[None]:
        """Unregisters the protect()ed regions for a with block (save and load
        use region ids 0, 1, 2, ... of their own), then registers them again.
        The lock is held: no checkpoint or restore can see the gap."""
        aside = dict(self._protected)
        for rid in aside:
            self._impl.unprotect(rid, wait=False)
        try:
            yield
        finally:
            for rid, (obj, changes) in aside.items():
                self._impl.protect(rid, obj, True, changes)

    @contextlib.contextmanager
    def _regions(
        self, regions: Mapping[int, ArrayLike], writable: bool, changes: Optional[str] = None
    ) -> Iterator[None]:
        """Protects ``regions`` for the length of a with block (lock held).
        ``writable``: restore targets, which do not make the cache grow (no
        checkpoint of them follows)."""
        done = []
        try:
            for rid, obj in regions.items():
                self._impl.protect(rid, obj, writable, changes, not writable)
                done.append(rid)
            yield
        finally:
            for rid in done:
                try:
                    self._impl.unprotect(rid, wait=False)
                except StateError:
                    pass  # closed meanwhile: its regions are gone already
