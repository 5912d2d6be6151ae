"""Collectives, process control, triggers, memory and profiling on the Accelerator."""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ._fields import AcceleratorCore


class OpsMixin(AcceleratorCore):
    """Methods that delegate to the state, the collectives and the data packages."""

    # ------------------------------------------------------------- collectives
    def gather(self, tensor: Any) -> Any:
        """Gather (nested) tensors from every process, concatenated along dim 0."""
        from accel_collectives import gather

        return gather(tensor)

    def gather_for_metrics(self, input_data: Any, use_gather_object: bool = False) -> Any:
        """Gather predictions for metrics, dropping the samples that were duplicated to give
        every process a full last batch."""
        from accel_data import gather_for_metrics

        return gather_for_metrics(input_data, use_gather_object=use_gather_object)

    def reduce(self, tensor: Any, reduction: str = "sum", scale: float = 1.0) -> Any:
        """Reduce (nested) tensors over every process: ``"sum"``, ``"mean"`` or ``"none"``."""
        from accel_collectives import reduce

        return reduce(tensor, reduction=reduction, scale=scale)

    def pad_across_processes(
        self, tensor: Any, dim: int = 0, pad_index: int = 0, pad_first: bool = False
    ) -> Any:
        """Pad (nested) tensors to the largest size over the processes along ``dim``."""
        from accel_collectives import pad_across_processes

        return pad_across_processes(tensor, dim=dim, pad_index=pad_index, pad_first=pad_first)

    # --------------------------------------------------------- process control
    def split_between_processes(
        self, inputs: Any, apply_padding: bool = False
    ) -> contextlib.AbstractContextManager[Any]:
        """Context giving this process its share of ``inputs``
        (see ``PartialState.split_between_processes``)."""
        return self.state._partial.split_between_processes(inputs, apply_padding=apply_padding)

    def wait_for_everyone(self) -> None:
        """Block until every process reaches this point."""
        self.state._partial.wait_for_everyone()

    def print(self, *args: Any, **kwargs: Any) -> None:
        """``print`` once per machine."""
        self.state._partial.print(*args, **kwargs)

    def main_process_first(self) -> contextlib.AbstractContextManager[None]:
        """The main process runs the block first, then the others."""
        return self.state._partial.main_process_first()

    def local_main_process_first(self) -> contextlib.AbstractContextManager[None]:
        """Each machine's first process runs the block first, then the others."""
        return self.state._partial.local_main_process_first()

    def on_main_process(self, function: Callable[..., Any] | None = None) -> Any:
        """Decorator: run on the main process only."""
        return self.state._partial.on_main_process(function)

    def on_local_main_process(self, function: Callable[..., Any] | None = None) -> Any:
        """Decorator: run on each machine's first process only."""
        return self.state._partial.on_local_main_process(function)

    def on_last_process(self, function: Callable[..., Any]) -> Any:
        """Decorator: run on the last process only."""
        return self.state._partial.on_last_process(function)

    def on_process(
        self,
        function: Callable[..., Any] | None = None,
        process_index: int | None = None,
    ) -> Any:
        """Decorator: run on the process of global index ``process_index`` only."""
        return self.state._partial.on_process(function, process_index=process_index)

    def on_local_process(
        self,
        function: Callable[..., Any] | None = None,
        local_process_index: int | None = None,
    ) -> Any:
        """Decorator: run on the process of local index ``local_process_index`` only."""
        return self.state._partial.on_local_process(
            function, local_process_index=local_process_index
        )

    # ----------------------------------------------------------------- triggers
    def set_trigger(self) -> None:
        """Raise a flag on this process; [`check_trigger`][accel.Accelerator.check_trigger] sees it on every process."""
        self.flag_tensor = torch.tensor(1, device=self.state.device)

    def check_trigger(self) -> bool:
        """Whether any process called [`set_trigger`][accel.Accelerator.set_trigger] since the last check (resets it).

        A collective: call it on every process.
        """
        from accel_collectives import reduce

        flag = (
            self.flag_tensor
            if self.flag_tensor is not None
            else torch.tensor(0, device=self.state.device)
        )
        flag = reduce(flag, reduction="sum")  # a copy: the raised flag is reset below
        if int(flag.item()) >= 1:
            self.flag_tensor = torch.tensor(0, device=self.state.device)
            return True
        return False

    # ------------------------------------------------------------------ memory
    def free_memory(self, *objects: Any) -> list[None]:
        """Drop every prepared object and the given references, collect garbage, empty device
        caches and reset [`step`][accel.Accelerator.step]. Use between two trainings in one script."""
        from accel_state import release_memory

        self._prepared.clear()
        self.engine.release()
        self.step = 0
        return release_memory(*objects)  # one full garbage collection, then the device caches

    def clear(self, *objects: Any) -> list[None]:
        """Alias of [`free_memory`][accel.Accelerator.free_memory]."""
        return self.free_memory(*objects)

    # -------------------------------------------------------------------- data
    def skip_first_batches(self, dataloader: Any, num_batches: int = 0) -> Any:
        """A loader that starts after ``num_batches`` batches, for this epoch only."""
        from accel_data import skip_first_batches

        return skip_first_batches(dataloader, num_batches=num_batches)

    @contextlib.contextmanager
    def join_uneven_inputs(
        self, joinables: list[Any], even_batches: bool | None = None
    ) -> Iterator[None]:
        """Train or evaluate on loaders whose processes get different numbers of batches.

        Processes that run out keep answering the others' collectives (``torch``'s ``Join``).

        Args:
            joinables: Prepared DDP models (and other ``Joinable`` objects).
            even_batches: Override ``even_batches`` of the prepared loaders inside the block
                (usually ``False``, so that no sample is repeated).
        """
        from accel_data import override_even_batches
        from torch.distributed.algorithms.join import Join

        if not self.state.use_distributed:
            yield
            return
        kind = getattr(self.state.distributed_type, "value", str(self.state.distributed_type))
        if not str(kind).startswith("MULTI_"):
            # Join works with DDP's joinables; sharding engines keep their own collectives.
            warnings.warn(
                "Joining uneven inputs is only supported for multi-GPU (and multi-CPU) "
                f"data-parallel training (DDP); under {kind}, join_uneven_inputs has no effect. "
                "Give every process the same number of batches (even_batches=True) instead.",
                UserWarning,
                stacklevel=3,
            )
            yield
            return
        with override_even_batches(self._prepared.dataloaders, even_batches), Join(joinables):
            yield

    # ---------------------------------------------------------------- profiling
    @contextlib.contextmanager
    def profile(self, profile_handler: Any = None) -> Iterator[Any]:
        """Profile the block with ``torch.profiler``; with ``output_trace_dir`` set, write a
        Chrome trace ``trace_rank_<process_index>.json`` there.

        Args:
            profile_handler: A ``ProfileKwargs`` (default: the Accelerator's, else defaults).
        """
        from accel_state import ProfileKwargs

        handler = profile_handler or self._handler(ProfileKwargs) or ProfileKwargs()
        profiler = handler.build()
        with profiler as prof:
            yield prof
        if handler.output_trace_dir:
            os.makedirs(handler.output_trace_dir, exist_ok=True)
            prof.export_chrome_trace(
                os.path.join(
                    handler.output_trace_dir, f"trace_rank_{self.state.process_index}.json"
                )
            )
