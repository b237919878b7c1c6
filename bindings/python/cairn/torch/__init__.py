"""Cairn as PyTorch's checkpoint storage (docs/torch.md).

* :class:`Writer` / :class:`Reader`: a ``torch.distributed.checkpoint``
  (DCP) ``StorageWriter`` (and ``AsyncStager``) and ``StorageReader``::

      import torch.distributed.checkpoint as dcp
      import cairn.torch

      dcp.async_save(sd, storage_writer=cairn.torch.Writer("/scratch/ckpt"), checkpoint_id=step)
      dcp.load(sd, storage_reader=cairn.torch.Reader("/scratch/ckpt"))   # newest step

* :class:`Checkpointer`: ``save(step)``, ``restore_latest()`` and
  ``checkpoint_due()`` for a training loop, over the same.

Needs torch 2.6 or newer (DCP's ``AsyncStager`` and ``get_state_dict``).
"""

from __future__ import annotations

import atexit as _atexit

from ._checkpointer import Checkpointer
from ._reader import Reader
from ._store import Location, close_clients
from ._writer import Writer

# Drain the clients this module opened (their last flushes) before the
# interpreter goes.
_atexit.register(close_clients)

__all__ = ["Checkpointer", "Location", "Reader", "Writer", "close_clients"]
