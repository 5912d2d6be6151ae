"""Backward, gradient accumulation, synchronisation, clipping and autocast."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

import torch

from ._fields import AcceleratorCore


class TrainingMixin(AcceleratorCore):
    """Methods used inside the training loop."""

    def backward(self, loss: torch.Tensor, **kwargs: Any) -> None:
        """Backward pass of ``loss``, divided by the accumulation steps and scaled under fp16.

        Keyword arguments go to ``loss.backward`` (e.g. ``retain_graph=True``), except
        ``scale_wrt_gas=False`` under DeepSpeed (``loss`` is then not divided by the
        accumulation steps, as DeepSpeed's own switch does), and ``learning_rate`` while a
        LOMO optimizer is prepared: then the pass is
        [`lomo_backward`][accel.Accelerator.lomo_backward] at that rate (transformers'
        ``Trainer`` with ``optim="lomo"`` calls it so).
        """
        steps = self.gradient_state.num_steps
        # DeepSpeed's switch: transformers' Trainer passes scale_wrt_gas=False for a loss it
        # already divided by the accumulation steps.
        if steps > 1 and kwargs.get("scale_wrt_gas", True):
            loss = loss / steps
        learning_rate = kwargs.get("learning_rate")
        if learning_rate is not None and self._lomo_optimizers():
            self.lomo_backward(loss, learning_rate)
            return
        self.engine.backward(loss, **kwargs)

    def lomo_backward(self, loss: torch.Tensor, learning_rate: float) -> None:
        """Backward pass fused with the update of LOMO optimizers (``lomo_optim.Lomo`` /
        ``AdaLomo``): each gradient updates its parameter as soon as it is computed.

        Raises:
            ValueError: when no prepared optimizer is a LOMO optimizer.
        """
        fused = self._lomo_optimizers()
        if not fused:
            names = [
                type(getattr(opt, "optimizer", opt)).__name__ for opt in self._prepared.optimizers
            ]
            raise ValueError(
                "lomo_backward runs the fused backward of LOMO optimizers; got no Lomo or "
                f"AdaLomo among the prepared optimizers ({names or 'none prepared'}). Prepare a "
                "lomo_optim.Lomo / AdaLomo with accelerator.prepare, or call "
                "accelerator.backward(loss) for other optimizers."
            )
        for optimizer in fused:
            optimizer.fused_backward(loss, learning_rate)

    def _lomo_optimizers(self) -> list[Any]:
        """The prepared LOMO optimizers (those that update inside the backward pass)."""
        return [
            inner
            for inner in (getattr(opt, "optimizer", opt) for opt in self._prepared.optimizers)
            if type(inner).__name__ in ("Lomo", "AdaLomo") and hasattr(inner, "fused_backward")
        ]

    @contextlib.contextmanager
    def maybe_context_parallel(
        self,
        buffers: list[torch.Tensor] | None = None,
        buffer_seq_dims: list[int] | None = None,
        no_restore_buffers: set[torch.Tensor] | None = None,
    ) -> Iterator[None]:
        """Context of one training step under context parallelism (``cp_size`` > 1).

        Inside it, each tensor of ``buffers`` holds only this process's part of its sequence
        dimension (changed in place; head-and-tail balanced when the length is a multiple of
        2 * ``cp_size``), and ``F.scaled_dot_product_attention`` runs as ring attention over
        the context-parallel processes (causal, without a mask). On exit the buffers get their
        whole contents back, except those in ``no_restore_buffers``. Without context
        parallelism the context does nothing. Enter it anew for every step.

        Args:
            buffers: Tensors with a sequence dimension: inputs, labels (shifted before the
                split), position ids ...
            buffer_seq_dims: The sequence dimension of each buffer.
            no_restore_buffers: Buffers (a subset of ``buffers``) left split on exit.

        Raises:
            ValueError: when the buffers and dimensions do not pair up, or a sequence length
                is not a multiple of ``cp_size``.
        """
        from .._engines.fsdp._context_parallel import check_buffers

        config = self.parallelism_config
        cp_size = int(config.cp_size or 1) if config is not None else 1
        check_buffers(buffers, buffer_seq_dims, no_restore_buffers, cp_size)
        with self.engine.context_parallel(
            list(buffers or []), list(buffer_seq_dims or []), no_restore_buffers
        ):
            yield

    def _do_sync(self) -> None:
        """Decide whether this step ends an accumulation cycle."""
        gs = self.gradient_state
        if gs.sync_with_dataloader and gs.end_of_dataloader:
            self.step = 0
            gs._set_sync_gradients(True)
        else:
            self.step += 1
            gs._set_sync_gradients((self.step % gs.num_steps) == 0)

    @contextlib.contextmanager
    def accumulate(self, *models: torch.nn.Module) -> Iterator[None]:
        """Context for one batch of gradient accumulation.

        Inside it, gradients are synchronised (and ``optimizer.step``/``zero_grad`` act) only on
        every ``gradient_accumulation_steps``-th batch and on the last batch of the dataloader;
        other batches run their backward pass under ``no_sync``.
        """
        self._do_sync()
        skip_sync = (
            not self.gradient_state.sync_gradients and not self.gradient_state.sync_each_batch
        )
        with contextlib.ExitStack() as stack:
            for model in models:
                if skip_sync:
                    stack.enter_context(self.no_sync(model))
            yield

    @contextlib.contextmanager
    def no_sync(self, model: torch.nn.Module) -> Iterator[None]:
        """Context in which backward passes of ``model`` do not all-reduce gradients."""
        with self.engine.no_sync(model):
            yield

    @contextlib.contextmanager
    def trigger_sync_in_backward(self, model: torch.nn.Module) -> Iterator[None]:
        """Force the next backward pass of ``model`` to synchronise gradients, even inside
        ``no_sync`` (e.g. after several forward passes)."""
        from .._engines._ddp import trigger_sync_in_backward

        with trigger_sync_in_backward(model):
            yield

    @contextlib.contextmanager
    def autocast(self, autocast_handler: Any = None) -> Iterator[None]:
        """Autocast block for the run's mixed precision (no-op in full precision).

        Args:
            autocast_handler: An ``AutocastKwargs`` overriding the Accelerator's.
        """
        from accel_precision import autocast_context
        from accel_state import AutocastKwargs

        handler = autocast_handler or self._handler(AutocastKwargs)
        with autocast_context(self.state.mixed_precision, self.state.device.type, handler):
            yield

    def unscale_gradients(self, optimizer: Any = None) -> None:
        """Divide the gradients by the fp16 loss scale (once per step; no-op otherwise).

        Args:
            optimizer: A prepared optimizer or a list of them (default: all).
        """
        if self.scaler is None:
            return
        if optimizer is None:
            optimizers = self._prepared.optimizers
        elif isinstance(optimizer, (list, tuple)):
            optimizers = list(optimizer)
        else:
            optimizers = [optimizer]
        for opt in optimizers:
            if getattr(opt, "_unscaled", False):
                continue
            self.scaler.unscale_(getattr(opt, "optimizer", opt))
            if hasattr(opt, "_unscaled"):
                opt._unscaled = True

    def clip_grad_norm_(
        self,
        parameters: Iterable[torch.nn.Parameter],
        max_norm: float,
        norm_type: float = 2,
    ) -> torch.Tensor:
        """Clip the norm of the gradients (unscaling them first under fp16); return the norm."""
        parameters = list(parameters)
        self.unscale_gradients()
        return self.engine.clip_grad_norm_(parameters, max_norm, norm_type)

    def clip_grad_value_(self, parameters: Iterable[torch.nn.Parameter], clip_value: float) -> None:
        """Clip each gradient value to ``[-clip_value, clip_value]`` (unscaling first)."""
        parameters = list(parameters)
        self.unscale_gradients()
        torch.nn.utils.clip_grad_value_(parameters, clip_value)
