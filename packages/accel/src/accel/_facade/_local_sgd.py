"""``LocalSGD``: each process trains alone and the weights are averaged every few steps.

Inside the context, the model's gradients are not all-reduced (the engine's ``no_sync``), so a
step costs no communication; every ``local_sgd_steps`` calls of ``step()`` (and when the
context exits) the parameters are replaced by their mean over the processes
(``accel_collectives.average_parameters``, one all-reduce per dtype).
"""

from __future__ import annotations

import contextlib
from types import TracebackType
from typing import TYPE_CHECKING, Any

import torch
from accel_collectives import average_parameters
from accel_state import DistributedType

if TYPE_CHECKING:
    from ._accelerator import Accelerator

_SUPPORTED = frozenset(
    {
        DistributedType.NO,
        DistributedType.MULTI_CPU,
        DistributedType.MULTI_GPU,
        DistributedType.MULTI_NPU,
        DistributedType.MULTI_XPU,
        DistributedType.MULTI_MLU,
        DistributedType.MULTI_SDAA,
        DistributedType.MULTI_MUSA,
        DistributedType.MULTI_HPU,
        DistributedType.MULTI_NEURON,
    }
)


class LocalSGD:
    """Local SGD on top of an ``Accelerator``: train locally, average weights every k steps.

    Use it as a context manager around the training loop and call ``step()`` after each
    optimizer step::

        with LocalSGD(accelerator, model, local_sgd_steps=8) as local_sgd:
            for batch in loader:
                loss = model(**batch).loss
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
                local_sgd.step()

    Only data-parallel replicas (DDP, or one process) can be averaged: DeepSpeed, FSDP,
    Megatron-LM and XLA shard or own the weights, and are refused.

    Args:
        accelerator: The ``Accelerator`` that prepared ``model``.
        model: The prepared model whose parameters are averaged.
        local_sgd_steps: Number of ``step()`` calls between two averagings (>= 1).
        enabled: False makes the context and ``step()`` do nothing (plain data-parallel
            training, gradients all-reduced every step); so does a run on one process.

    Raises:
        NotImplementedError: if the accelerator's distributed type is not data-parallel.
        ValueError: if ``local_sgd_steps`` is not an int >= 1.

    Attributes:
        num_steps: ``step()`` calls so far.
    """

    def __init__(
        self,
        accelerator: Accelerator,
        model: torch.nn.Module,
        local_sgd_steps: int,
        enabled: bool = True,
    ) -> None:
        distributed_type = accelerator.distributed_type
        if distributed_type not in _SUPPORTED:
            raise NotImplementedError(
                "LocalSGD averages the weights of data-parallel replicas (one process, or DDP "
                f"on CPUs or accelerators); this run's distributed type is "
                f"{distributed_type.value}, which shards or owns the weights. Train without "
                "LocalSGD, or use DDP (no DeepSpeed, FSDP, Megatron-LM or XLA plugin)."
            )
        steps = local_sgd_steps
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(
                f"local_sgd_steps is the number of steps between averagings, an int >= 1; got "
                f"{local_sgd_steps!r}. Pass e.g. local_sgd_steps=8."
            )
        self.accelerator = accelerator
        self.model = model
        self.local_sgd_steps = steps
        self.enabled = bool(enabled) and distributed_type != DistributedType.NO
        self.num_steps = 0
        self._no_sync: contextlib.AbstractContextManager[Any] | None = None

    def __enter__(self) -> LocalSGD:
        if self.enabled:
            self._no_sync = self.accelerator.no_sync(self.model)
            self._no_sync.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self.enabled or self._no_sync is None:
            return
        no_sync, self._no_sync = self._no_sync, None
        try:
            if exc_type is None:
                # The steps since the last averaging count too. After an error the other
                # processes may never get here, so no collective is started.
                self._average()
        finally:
            no_sync.__exit__(exc_type, exc, tb)

    def step(self) -> None:
        """Count one optimizer step; average the parameters every ``local_sgd_steps`` steps."""
        self.num_steps += 1
        if self.enabled and self.num_steps % self.local_sgd_steps == 0:
            self._average()

    def _average(self) -> None:
        average_parameters(self.model.parameters())
