"""Client.save and Client.load: a mapping of arrays (a model's
``state_dict()``) as one version with a manifest (_state.py), through the
client's own regions."""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Tuple, Union, overload

from . import _cairn, _state
from ._enums import ChangeMode
from ._errors import InvalidArgumentError, NotFoundError, SizeMismatchError, StateError
from ._types import ArrayLike

if TYPE_CHECKING:
    from numpy.typing import NDArray


class _ArrayMappings:
    """Client's save and load (a base of :class:`cairn.Client`, which sets
    the state below)."""

    _impl: _cairn.Client
    _lock: threading.RLock
    _protected: Dict[int, Tuple[object, Optional[str]]]  # id -> (obj, changes)
    _zero_copy: bool
    _in_capture: List[object]

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
