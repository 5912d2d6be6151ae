"""``gather`` and ``reduce`` between XLA replicas: torch_xla's in-graph collectives.

An XLA run has no ``torch.distributed`` group of ours; its replicas exchange tensors through
``xm.all_gather`` / ``xm.all_reduce``, which join the lazy graph like any other operation.
"""

from __future__ import annotations

import torch
from accel_state import xla_model


def xla_gather(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Concatenate ``tensor`` of every replica along dim 0 (a 0-d tensor counts as 1-d)."""
    if tensor.ndim == 0:
        tensor = tensor.reshape(1)
    if tensor.device != device:
        tensor = tensor.to(device)
    return xla_model().all_gather(tensor, dim=0)


def xla_all_reduce(tensor: torch.Tensor, reduction: str, device: torch.device) -> torch.Tensor:
    """Element-wise ``sum`` (also for ``mean``), ``max`` or ``min`` over the replicas, into a
    new tensor (the input is left alone)."""
    xm = xla_model()
    op = {"max": xm.REDUCE_MAX, "min": xm.REDUCE_MIN}.get(reduction, xm.REDUCE_SUM)
    source = tensor if tensor.device == device else tensor.to(device)
    return xm.all_reduce(op, source.clone())


__all__ = ["xla_all_reduce", "xla_gather"]
