"""``cairn.torch.Checkpointer``: one line in a training loop.

It is DCP underneath (``get_state_dict`` for the model and optimizers, then
``async_save`` with a :class:`~cairn.torch.Writer`), so whatever DCP can
save (DDP, FSDP2, tensor parallel, plain modules) it can, and a checkpoint
it writes is an ordinary DCP checkpoint for :class:`~cairn.torch.Reader`.
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import Future
from typing import Any, Dict, Iterable, List, Optional, Union

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.state_dict_loader import load
from torch.distributed.checkpoint.state_dict_saver import async_save, save

from .._client import Client
from .._errors import Error
from ._reader import Reader
from ._writer import Writer

__all__ = ["Checkpointer"]

_log = logging.getLogger("cairn.torch")


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


class Checkpointer:
    """Checkpoints a model and its optimizers into a Cairn directory.

    ::

        ckpt = cairn.torch.Checkpointer(model, optimizer, "/scratch/run1")
        start = ckpt.restore_latest() or 0       # newest complete step, or None
        for step in range(start + 1, steps + 1):
            train_one_step()
            if ckpt.checkpoint_due():            # or: step % 100 == 0
                ckpt.save(step)                  # blocks for the capture only
        ckpt.close()

    ``root``, ``name`` and the keyword arguments of :class:`cairn.Client`
    (or an open client as ``root``) as for :class:`~cairn.torch.Writer`
    (``name`` default ``"train"``). ``async_save=False`` makes :meth:`save`
    return once the step is durable. ``process_group``: the group DCP
    coordinates on (default: the default group when ``torch.distributed``
    is initialized; async saves need a CPU backend such as gloo). Every
    method is collective under ``torch.distributed``: every rank calls it.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: Union[torch.optim.Optimizer, Iterable[torch.optim.Optimizer], None],
        root: Union[Client, str, "os.PathLike[str]"],
        *,
        name: str = "train",
        async_save: bool = True,
        process_group: Optional[Any] = None,
        **client_kwargs: Any,
    ) -> None:
        self.model = model
        if optimizer is None:
            self._optimizers: List[torch.optim.Optimizer] = []
        elif isinstance(optimizer, torch.optim.Optimizer):
            self._optimizers = [optimizer]
        else:
            self._optimizers = list(optimizer)
        self.writer = Writer(root, name=name, process_group=process_group, **client_kwargs)
        self.store = self.writer.store
        self._async = async_save
        self._group = process_group
        self._pending: Optional[Future[Any]] = None

    def _state(self) -> Dict[str, Any]:
        model_sd, optim_sd = get_state_dict(self.model, self._optimizers)
        return {"model": model_sd, "optim": optim_sd} if self._optimizers else {"model": model_sd}

    def save(self, step: int) -> None:
        """Checkpoints the model and optimizers as ``step`` (an int that grows
        from save to save). Waits for the previous save first; returns once
        the state is captured (``async_save``) or durable."""
        self.wait()
        state = self._state()
        if self._async:
            pending = async_save(state, storage_writer=self.writer, checkpoint_id=str(step), process_group=self._group)
            # The writer stages synchronously (stage() returns the dict), so
            # DCP returns a plain Future, not an AsyncSaveResponse.
            assert isinstance(pending, Future)
            self._pending = pending
        else:
            save(state, storage_writer=self.writer, checkpoint_id=str(step), process_group=self._group)

    def wait(self) -> None:
        """Blocks until the save in flight (if any) is durable, and raises its error."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def steps(self) -> List[int]:
        """The complete steps, newest first (rank 0's view, on every rank)."""
        steps = self.store.steps()
        if _distributed():
            box = [steps]
            dist.broadcast_object_list(box, src=0, group=self._group)
            steps = box[0]
        return steps

    def restore_latest(self) -> Optional[int]:
        """Loads the newest complete step into the model and optimizers and
        returns it; None if there is none that reads back. A step that fails
        on any rank (a damaged or missing shard) fails on every rank, and all
        of them go on to the next older step together."""
        self.wait()
        for step in self.steps():
            state = self._state()
            try:
                load(state, storage_reader=Reader(self.store.client, step, name=self.store.name),
                         process_group=self._group)  # fmt: skip
            except (CheckpointException, Error) as e:
                _log.warning("step %d of '%s' did not load, trying an older one: %s", step, self.store.name, e)
                continue
            set_state_dict(
                self.model, self._optimizers,
                model_state_dict=state["model"], optim_state_dict=state.get("optim", {}),
            )  # fmt: skip
            return step
        return None

    def checkpoint_due(self) -> bool:
        """Whether a save is due under Cairn's optimal interval (the client's
        ``mtbf_s``; :meth:`cairn.Client.checkpoint_due`), measured on this
        rank's saves; under ``torch.distributed`` True on every rank when it
        is True on any.

        Raises:
            ConfigError: no MTBF is configured.
        """
        due = self.store.client.checkpoint_due(self.store.data_name(self.store.rank))
        if _distributed():
            flag = torch.tensor([1 if due else 0])
            dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self._group)
            due = bool(flag.item())
        return due

    def close(self) -> None:
        """Waits for the save in flight. The client stays open for the process."""
        self.wait()
