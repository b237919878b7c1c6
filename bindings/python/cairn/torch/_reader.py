"""``cairn.torch.Reader``: a DCP ``StorageReader`` over a Cairn directory.

Each rank reads, for every chunk its plan names, the data version of the
saved rank that holds it (any saved rank: a load on another world size reads
other ranks' names, which is what resharding needs). A chunk read whole into
a contiguous destination of the same layout is restored straight into it;
any other is restored into a temporary of the captured tensor's shape and
copied out of the view DCP asks for. A version that several ranks of a node
read (a replicated model loaded on every rank) is read through the page
cache, once per node; any other the way it was written. Every block is checksum-verified by the
restore; a damaged version raises :class:`cairn.CorruptError`, which DCP
raises on every rank (:class:`~torch.distributed.checkpoint.api.CheckpointException`).
"""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
import socket
from collections import defaultdict
from typing import Any, Dict, FrozenSet, List, Optional, Set, Tuple, Union

import torch
from torch.distributed._shard._utils import narrow_tensor_by_index
from torch.distributed.checkpoint.metadata import Metadata
from torch.distributed.checkpoint.planner import LoadItemType, LoadPlan, LoadPlanner, ReadItem
from torch.distributed.checkpoint.storage import StorageReader
from torch.futures import Future

from .._client import Client
from .._errors import NotFoundError
from ._store import Location, Store, is_step, step_of

__all__ = ["Reader"]


class Reader(StorageReader):
    """Reads DCP checkpoints written by :class:`cairn.torch.Writer`.

    ``target`` and ``name`` as for the Writer. ``step`` (or DCP's
    ``checkpoint_id``) picks the step; default: the newest committed one.

    Raises (from ``read_metadata``):
        NotFoundError: the root has no committed step (or not that one).
    """

    def __init__(
        self,
        target: Union[Client, str, "os.PathLike[str]"],
        step: Optional[int] = None,
        *,
        name: str = "dcp",
        **client_kwargs: Any,
    ) -> None:
        super().__init__()
        self.store = Store(target, name, client_kwargs)
        self.step = step_of(step)
        self._locations: Dict[Any, Location] = {}
        self._restoring = False

    # A DCP load is one restore made of several calls (metadata, planning,
    # data): the client counts it as one from read_metadata (or the first
    # call that comes) to the end of read_data, so that the host cache's
    # background preparation does not take the cores and the memory
    # bandwidth the load needs in between (Client.begin_restore). A load
    # that fails before read_data (its planning) ends it at the next reset,
    # or when the reader goes.
    def _begin(self) -> None:
        if not self._restoring:
            self.store.client.begin_restore()
            self._restoring = True

    def _end(self) -> None:
        if self._restoring:
            self._restoring = False
            self.store.client.end_restore()

    def __del__(self) -> None:
        try:
            self._end()
        except Exception:  # the client was closed first: nothing to end
            pass

    def reset(self, checkpoint_id: Union[str, "os.PathLike[str]", None] = None) -> None:
        self._end()  # a load that failed part-way
        self.step = step_of(checkpoint_id)

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: Union[str, "os.PathLike[str]"]) -> bool:
        return is_step(checkpoint_id)

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        self._begin()
        if self.step is None:
            steps = self.store.steps()
            if not steps:
                raise NotFoundError(f"no committed step of '{self.store.name}' in {self.store.dirs}")
            self.step = steps[0]
        blob = self.store.load_blob(self.store.meta_name, self.step, "metadata")
        metadata = pickle.loads(blob)
        if not isinstance(metadata, Metadata):
            raise NotFoundError(f"step {self.step} of '{self.store.name}' holds no DCP metadata")
        return metadata

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        self._begin()
        self._locations = dict(metadata.storage_data or {})

    def prepare_local_plan(self, plan: LoadPlan) -> LoadPlan:
        # The coordinator learns which node each plan reads on.
        return dataclasses.replace(plan, storage_data=_Node(socket.gethostname()))

    def prepare_global_plan(self, plans: List[LoadPlan]) -> List[LoadPlan]:
        """Marks, in each rank's plan, the saved versions that other ranks of
        its node read too (every rank loading a replicated model reads every
        saved rank's version): those are read through the page cache, so
        each comes off the disk once per node, not once per rank."""
        readers: Dict[Tuple[str, int, int], int] = defaultdict(int)
        wanted: List[Tuple[str, Set[Tuple[int, int]]]] = []
        for plan in plans:
            node = plan.storage_data.host if isinstance(plan.storage_data, _Node) else ""
            versions = {
                (loc.rank, loc.version)
                for loc in (self._locations[item.storage_index] for item in plan.items)
                if loc.inline is None
            }
            for v in versions:
                readers[(node, *v)] += 1
            wanted.append((node, versions))
        return [
            dataclasses.replace(
                plan, storage_data=_Node(node, frozenset(v for v in versions if readers[(node, *v)] > 1))
            )
            for plan, (node, versions) in zip(plans, wanted)
        ]

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future[None]:
        self._begin()
        try:
            self._read_plan(plan, planner)
        finally:
            self._end()
        fut: Future[None] = Future()
        fut.set_result(None)
        return fut

    def _read_plan(self, plan: LoadPlan, planner: LoadPlanner) -> None:
        by_version: Dict[Tuple[int, int], List[Tuple[ReadItem, Location]]] = defaultdict(list)
        for item in plan.items:
            loc = self._locations[item.storage_index]
            if loc.inline is not None:
                self._read_inline(item, loc, planner)
            else:
                by_version[(loc.rank, loc.version)].append((item, loc))
        shared = plan.storage_data.shared if isinstance(plan.storage_data, _Node) else frozenset()
        for (rank, version), items in sorted(by_version.items()):
            self._read_version(rank, version, items, planner, (rank, version) in shared)

    def _read_inline(self, item: ReadItem, loc: Location, planner: LoadPlanner) -> None:
        assert loc.inline is not None
        if item.type == LoadItemType.BYTE_IO:
            planner.load_bytes(item, io.BytesIO(loc.inline))
            return
        saved = torch.load(io.BytesIO(loc.inline), map_location="cpu", weights_only=True)
        dest = planner.resolve_tensor(item).detach()
        _copy_into(item, narrow_tensor_by_index(saved, item.storage_offsets, item.lengths), dest, planner)

    def _read_version(
        self,
        rank: int,
        version: int,
        items: List[Tuple[ReadItem, Location]],
        planner: LoadPlanner,
        shared_on_node: bool,
    ) -> None:
        """One restore of saved rank ``rank``'s data version for every chunk of it."""
        uses: Dict[str, int] = defaultdict(int)
        for _, loc in items:
            uses[loc.key] += 1
        into: Dict[str, torch.Tensor] = {}
        copies: List[Tuple[ReadItem, Location, torch.Tensor]] = []
        direct: List[Tuple[ReadItem, torch.Tensor]] = []
        for item, loc in items:
            dest = planner.resolve_tensor(item).detach()
            if uses[loc.key] == 1 and _direct(item, loc, dest):
                into[loc.key] = dest.view(loc.shape)
                direct.append((item, dest))
            else:
                if loc.key not in into:
                    into[loc.key] = torch.empty(loc.shape, dtype=loc.dtype)
                copies.append((item, loc, dest))
        self.store.client.load(
            self.store.data_name(rank), version, into, strict=False, shared_on_node=shared_on_node
        )
        for item, dest in direct:
            planner.commit_tensor(item, dest)
        for item, loc, dest in copies:
            view = loc.view_of(into[loc.key])
            _copy_into(item, narrow_tensor_by_index(view, item.storage_offsets, item.lengths), dest, planner)


@dataclasses.dataclass(frozen=True)
class _Node:
    """A load plan's storage_data: the node it reads on and, once the
    coordinator has seen every plan, the (saved rank, version) pairs that
    other ranks of that node read too."""

    host: str
    shared: FrozenSet[Tuple[int, int]] = frozenset()


def _direct(item: ReadItem, loc: Location, dest: torch.Tensor) -> bool:
    """The chunk is the whole captured tensor and ``dest`` takes it as is."""
    return (
        loc.whole()
        and all(o == 0 for o in item.storage_offsets)
        and tuple(item.lengths) == loc.size
        and dest.is_contiguous()
        and dest.dtype == loc.dtype
        and dest.numel() == _numel(loc.shape)
    )


def _numel(shape: Tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _copy_into(item: ReadItem, src: torch.Tensor, dest: torch.Tensor, planner: LoadPlanner) -> None:
    if dest.size() != src.size():
        raise ValueError(f"chunk {item.storage_index} is {tuple(src.size())}, its destination {tuple(dest.size())}")
    dest.copy_(src)
    planner.commit_tensor(item, dest)
