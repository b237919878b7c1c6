"""``cairn.torch.Writer``: a DCP ``StorageWriter`` and ``AsyncStager``.

``dcp.async_save`` calls :meth:`Writer.stage` on the training thread: the
rank's tensors are captured as one data version (zero-copy by default: their
memory is write-protected and a Cairn thread copies it into the host cache as
it was; with ``capture="copy"`` a memcpy into that cache) and the state dict
comes back with the same tensor objects, so DCP's planner in the save thread sees
their shapes and shards but the writer never reads them again. In the save
thread, :meth:`write_data` finds each planned chunk in what was captured (by
its memory: a chunk is a view of a captured tensor) and waits for the data
version to be durable; :meth:`finish` on the coordinator writes the metadata
as the step's version. ``dcp.save`` (no stage) captures in ``write_data``.
"""

from __future__ import annotations

import bisect
import copy
import dataclasses
import io
import os
import pickle
import threading
from collections import deque
from typing import Any, Deque, Dict, FrozenSet, List, Optional, Tuple, Union

import torch
from torch.distributed.checkpoint._nested_dict import flatten_state_dict
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta
from torch.distributed.checkpoint.planner import SavePlan, SavePlanner, WriteItem, WriteItemType
from torch.distributed.checkpoint.staging import AsyncStager
from torch.distributed.checkpoint.storage import StorageWriter, WriteResult
from torch.futures import Future

from .._client import ChangeMode, Client
from .._errors import InvalidArgumentError
from ._store import Location, Store, is_step, step_of

__all__ = ["Writer"]

_Exact = Tuple[int, Tuple[int, ...], Tuple[int, ...], torch.dtype, str]


def _local(value: Any) -> List[torch.Tensor]:
    """The local data of a state dict value: a tensor, a DTensor's local
    tensor, a ShardedTensor's local shards; nothing for other values."""
    if isinstance(value, torch.Tensor):
        local = getattr(value, "_local_tensor", None)  # DTensor
        return [local if isinstance(local, torch.Tensor) else value]
    shards = getattr(value, "local_shards", None)  # ShardedTensor
    if callable(shards) and hasattr(value, "metadata"):
        return [s.tensor for s in shards()]
    return []


def _staged_copy(obj: Any) -> Any:
    """``obj`` with its tensors kept and every other leaf deep-copied, so that
    the training loop can change it after staging."""
    if _local(obj):
        return obj
    if isinstance(obj, dict):
        items = {k: _staged_copy(v) for k, v in obj.items()}
        return items if type(obj) is dict else type(obj)(items)  # OrderedDict
    if isinstance(obj, (list, tuple)) and type(obj) in (list, tuple):
        return type(obj)(_staged_copy(v) for v in obj)
    return copy.deepcopy(obj)


# Tensors smaller than this are copied into one packed region per version: the
# host cache gives every region whole blocks, and a model's biases, norms and
# optimizer step counters (hundreds of tensors of a few KiB) would otherwise
# hold a block each.
PACK_BELOW = 256 << 10
_PACK_ALIGN = 64
PACKED_KEY = "packed"


class _Capture:
    """One captured data version and how to find a chunk in it."""

    def __init__(
        self,
        store: Store,
        tensors: List[torch.Tensor],
        changes: Optional[ChangeMode],
        fqns: Optional[FrozenSet[str]] = None,
        held: FrozenSet[str] = frozenset(),
    ):
        #: The state dict keys captured (None: whatever write_data was given).
        self.fqns = fqns
        #: The keys with tensor data this rank held, captured or left to another rank.
        self.held = held
        self.version = store.next_data_version()
        self.rank = store.rank
        arrays: Dict[str, torch.Tensor] = {}
        self._exact: Dict[_Exact, Location] = {}
        # start, end, base tensor, its key, its byte offset in the packed region (-1: own region)
        self._ranges: List[Tuple[int, int, torch.Tensor, str, int]] = []
        small: List[Tuple[torch.Tensor, int]] = []
        packed = 0
        for t in tensors:
            t = t.detach()
            if t.numel() == 0 or _exact(t) in self._exact:
                continue
            dense = t if t.is_contiguous() else t.contiguous()
            if dense.nbytes < PACK_BELOW and dense.device.type == "cpu":
                small.append((dense, packed))
                self._exact[_exact(t)] = self._packed(dense.dtype, dense.shape, dense.stride(), packed)
                where, key = packed, PACKED_KEY
                packed += -(-dense.nbytes // _PACK_ALIGN) * _PACK_ALIGN
            else:
                where, key = -1, f"t{len(arrays)}"
                arrays[key] = dense
                self._exact[_exact(t)] = self._location(key, dense, 0, dense.shape, dense.stride())
            if dense is t:
                self._ranges.append((t.data_ptr(), t.data_ptr() + t.nbytes, t, key, where))
        self._packed_bytes = packed
        if small:
            buf = torch.empty(packed, dtype=torch.uint8)
            for dense, at in small:
                buf[at : at + dense.nbytes].copy_(dense.reshape(-1).view(torch.uint8))
            arrays[PACKED_KEY] = buf
        self._ranges.sort(key=lambda r: r[0])
        self._starts = [r[0] for r in self._ranges]
        store.client.save(store.data_name(self.rank), self.version, arrays, changes=changes)

    def _location(self, key: str, base: torch.Tensor, offset: int, size: Any, stride: Any) -> Location:
        return Location(self.rank, self.version, key, tuple(base.shape), base.dtype, offset,
                        tuple(size), tuple(stride))  # fmt: skip

    def _packed(self, dtype: torch.dtype, size: Any, stride: Any, byte_offset: int) -> Location:
        """A chunk in the packed region: bytes from ``byte_offset``, viewed as ``dtype``."""
        return Location(self.rank, self.version, PACKED_KEY, (-1,), torch.uint8, byte_offset,
                        tuple(size), tuple(stride), view_dtype=dtype)  # fmt: skip

    def find(self, t: torch.Tensor) -> Optional[Location]:
        """Where the data of ``t`` (a chunk DCP resolved) was captured; None
        if it is not memory that was captured (a tensor the planner made)."""
        hit = self._exact.get(_exact(t))
        if hit is not None or t.numel() == 0:
            return self._sized(hit)
        i = bisect.bisect_right(self._starts, t.data_ptr()) - 1
        if i < 0:
            return None
        start, end, base, key, where = self._ranges[i]
        last = t.data_ptr() + t.element_size() * (1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride())))
        if base.dtype != t.dtype or base.device != t.device or last > end:
            return None
        if where >= 0:
            return self._sized(self._packed(t.dtype, t.shape, t.stride(), where + t.data_ptr() - start))
        return self._location(key, base, (t.data_ptr() - start) // t.element_size(), t.shape, t.stride())

    def _sized(self, loc: Optional[Location]) -> Optional[Location]:
        """A packed location with the packed region's size filled in."""
        if loc is None or loc.view_dtype is None:
            return loc
        return dataclasses.replace(loc, shape=(self._packed_bytes,))


def _exact(t: torch.Tensor) -> _Exact:
    return (t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype, str(t.device))


def _whole_everywhere(value: Any) -> bool:
    """Whether every rank holds ``value`` whole, so that DCP writes it once:
    a plain tensor, or a DTensor replicated on every mesh dimension."""
    placements = getattr(value, "placements", None)
    if placements is not None:  # DTensor
        return all(p.is_replicate() for p in placements)
    return isinstance(value, torch.Tensor)


def _left_to_others(held: Dict[str, Any], group: Any) -> FrozenSet[str]:
    """The keys of ``held`` this rank leaves to another one at a series'
    first save: the ranks exchange which tensors each holds whole (one
    all_gather of names and sizes) and give each tensor that several hold to
    the one of them with the fewest bytes so far, largest first, so that
    every rank computes the same split and captures only its part."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size(group) < 2:
        return frozenset()
    whole = {k: sum(_nbytes(t) for t in _local(v)) for k, v in held.items() if _whole_everywhere(v)}
    own = sum(_nbytes(t) for k, v in held.items() if k not in whole for t in _local(v))
    ranks: List[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(ranks, (own, whole), group=group)
    load = [r[0] for r in ranks]
    holders: Dict[str, List[int]] = {}
    for r, (_, sizes) in enumerate(ranks):
        for k in sizes:
            holders.setdefault(k, []).append(r)
    me = dist.get_rank(group)
    mine = ranks[me][1]
    left = set()
    for k in sorted(holders, key=lambda k: (-max(ranks[r][1][k] for r in holders[k]), k)):
        to = min(holders[k], key=lambda r: (load[r], r))
        load[to] += ranks[to][1][k]
        if to != me and k in mine:
            left.add(k)
    return frozenset(left)


def _nbytes(t: Any) -> int:
    return int(t.numel()) * int(t.element_size())


def _inline(item: WriteItem, data: Any) -> Location:
    """A bytes item, or a tensor that is not captured memory, kept in the metadata."""
    if item.type == WriteItemType.BYTE_IO:
        return Location(inline=bytes(data.getbuffer()))
    buf = io.BytesIO()
    torch.save(data.detach().cpu().contiguous(), buf)
    return Location(inline=buf.getvalue(), inline_tensor=True)


class Writer(StorageWriter, AsyncStager):
    """Writes DCP checkpoints into a Cairn directory.

    ``target`` is the root directory (every rank passes the same one; a
    client is opened there once per process and kept, with the keyword
    arguments of :class:`cairn.Client`) or an open :class:`cairn.Client`.
    ``name`` names the checkpoint series in it (default ``"dcp"``);
    ``step`` is the step of the next save when ``checkpoint_id`` is not
    given (default: one above the newest). ``changes`` is the data versions'
    change detection (default: the client's ``checkpoint.changes``;
    ``"hash"`` layers each version on the previous one). ``process_group``:
    the group ``async_save`` runs on (default: the default group); the
    first :meth:`stage` of a series in a process meets the other ranks in it
    once (one ``all_gather_object``) to split replicated tensors.

    ``dcp.save(sd, storage_writer=w, checkpoint_id=step)`` and
    ``dcp.async_save(...)`` both work; with ``async_save`` the call blocks
    only for :meth:`stage` (the capture). One ``async_save`` per writer may
    be in flight at a time, as DCP requires.
    """

    def __init__(
        self,
        target: Union[Client, str, "os.PathLike[str]"],
        step: Optional[int] = None,
        *,
        name: str = "dcp",
        changes: Optional[ChangeMode] = None,
        process_group: Optional[Any] = None,
        **client_kwargs: Any,
    ) -> None:
        super().__init__()
        self.store = Store(target, name, client_kwargs)
        self._changes = changes
        self._group = process_group
        self._step = step_of(step)
        self._staged: Deque[_Capture] = deque()
        self._lock = threading.Lock()
        self.is_coordinator = False
        #: The step the last :meth:`finish` on this rank committed (coordinator).
        self.last_step: Optional[int] = None

    # -- AsyncStager ---------------------------------------------------------

    _synchronize_after_execute = False  # stage() is complete when it returns

    def stage(self, state_dict: Dict[str, Any]) -> Dict[str, Any]:
        """Captures the rank's tensors into the host cache (returns once
        captured) and returns the state dict with the same tensors and
        copies of every other value."""
        flat, _ = flatten_state_dict(state_dict)  # the keys DCP's planner uses
        # DCP writes a tensor that several ranks hold whole once: each rank
        # captures only the ones it will write (half of a replicated model's
        # copy on 2 ranks). The split is agreed on at the first save and then
        # learnt from the last plan; prepare_global_plan moves an item to a
        # rank that captured it when DCP's choice differs.
        held = {k: v for k, v in flat.items() if _local(v)}
        elsewhere = self.store.series.elsewhere
        if elsewhere is None:
            elsewhere = _left_to_others(held, self._group)
        fqns = frozenset(held) - elsewhere
        tensors = [t for k in sorted(fqns) for t in _local(flat[k])]
        capture = _Capture(self.store, tensors, self._changes, fqns, frozenset(held))
        staged: Dict[str, Any] = _staged_copy(state_dict)
        with self._lock:
            self._staged.append(capture)
        return staged

    def synchronize_staging(self) -> None:
        """Nothing to wait for: :meth:`stage` returns once captured."""

    def close(self) -> None:
        """The client stays open for the next writer on this root."""

    # -- StorageWriter -------------------------------------------------------

    def reset(self, checkpoint_id: Union[str, "os.PathLike[str]", None] = None) -> None:
        self._step = step_of(checkpoint_id)

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: Union[str, "os.PathLike[str]"]) -> bool:
        return is_step(checkpoint_id)

    def set_up_storage_writer(self, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        self.is_coordinator = is_coordinator

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        """Tells the coordinator which keys this rank captured (None: any)."""
        with self._lock:
            head = self._staged[0] if self._staged else None
        return dataclasses.replace(plan, storage_data=head.fqns if head is not None else None)

    def prepare_global_plan(self, plans: List[SavePlan]) -> List[SavePlan]:
        """Gives each replicated tensor to a rank that captured it: DCP's
        deduplication picks one rank per duplicate by plan size, which may
        differ from the last save's choice each rank captured by."""
        captured: List[Optional[FrozenSet[str]]] = [p.storage_data for p in plans]
        if all(c is None for c in captured):
            return plans
        items: List[List[WriteItem]] = [[] for _ in plans]
        for i, plan in enumerate(plans):
            for item in plan.items:
                c = captured[i]
                if item.type == WriteItemType.BYTE_IO or c is None or item.index.fqn in c:
                    items[i].append(item)
                    continue
                to = next((j for j, cj in enumerate(captured) if cj is None or item.index.fqn in cj), None)
                if to is None:
                    raise InvalidArgumentError(f"no rank captured '{item.index.fqn}' for this save")
                items[to].append(item)
        return [dataclasses.replace(p, items=it, storage_data=None) for p, it in zip(plans, items)]

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> Future[List[WriteResult]]:
        with self._lock:
            capture = self._staged.popleft() if self._staged else None
        resolved = [(i, planner.resolve_data(i)) for i in plan.items]
        if capture is None:  # dcp.save: capture what the plan names, now
            tensors = [d for _, d in resolved if isinstance(d, torch.Tensor)]
            capture = _Capture(self.store, tensors, self._changes)
        results = []
        for item, data in resolved:
            loc = capture.find(data.detach()) if isinstance(data, torch.Tensor) else None
            if loc is None:
                if isinstance(data, torch.Tensor) and data.numel() > 0 and capture.fqns is not None:
                    raise InvalidArgumentError(
                        f"'{item.index.fqn}': the planner resolved a tensor that stage() did not capture (one "
                        "made at write time, from memory the training loop may have changed since); "
                        "async_save with cairn.torch.Writer needs a planner that resolves the state dict's "
                        "own tensors, as DCP's default planner does (or use dcp.save)"
                    )
                loc = _inline(item, data)
            size = len(loc.inline) if loc.inline is not None else _nbytes(data)
            results.append(WriteResult(index=item.index, size_in_bytes=size, storage_data=loc))
        if capture.fqns is not None:  # next time, skip what other ranks wrote
            self.store.series.elsewhere = capture.held - {i.index.fqn for i in plan.items}
        self.store.client.wait(self.store.data_name(capture.rank), capture.version, self.store.level)
        fut: Future[List[WriteResult]] = Future()
        fut.set_result(results)
        return fut

    def finish(self, metadata: Metadata, results: List[List[WriteResult]]) -> None:
        """Writes the metadata as version ``step`` of ``<name>.meta`` once
        every rank's data is durable (DCP calls it after every write_data)."""
        metadata.storage_data = {r.index: r.storage_data for rank in results for r in rank}
        step = self._step
        if step is None:
            newest = self.store.steps()
            step = (newest[0] + 1) if newest else 1
        self.store.save_blob(self.store.meta_name, step, "metadata", pickle.dumps(metadata))
        self.last_step = step
        self._step = None

    def storage_meta(self) -> Optional[StorageMeta]:
        return StorageMeta(checkpoint_id=str(self._step) if self._step is not None else None)
