"""``DataLoaderDispatcher``: the main process reads the data and every process gets a slice.

Each step the main process reads one global batch (``num_processes`` batches of the loader's
batch size, or one batch cut in parts with ``split_batches``), sends its layout and tensors to
the other processes, and every process keeps its slice. The other processes never touch the
dataset, which suits streams that cannot be read twice or in parallel.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from accel_state import GradientState, PartialState
from torch.utils.data import DataLoader

from ..sharding._comm import (
    broadcast_object,
    broadcast_tensors,
    concat_batches,
    find_batch_size,
    map_tensors,
    slice_batch,
)
from ._loaders import _PreparedLoaderMixin, _set_loader_attribute, _skip_iter


@dataclass(frozen=True)
class _TensorSpec:
    shape: tuple[int, ...]
    dtype: torch.dtype


@dataclass
class _StepHeader:
    """What the main process tells the others before the tensors of a step."""

    stop: bool
    last: bool = False
    real: int = -1
    size: int = -1
    layout: Any = None


def _default_slice(
    data: Any,
    tensor_slice: slice,
    process_index: int | None = None,
    num_processes: int | None = None,
) -> Any:
    return slice_batch(data, tensor_slice)


class DataLoaderDispatcher(_PreparedLoaderMixin, DataLoader):
    """A DataLoader whose main process reads every batch and sends each process its slice.

    Args:
        dataset: The dataset (read by the main process only).
        split_batches: Each batch of the loader is the global batch, cut in equal parts.
        skip_batches: Steps skipped at the start of the first pass only.
        use_stateful_dataloader: Build the loader on torchdata's ``StatefulDataLoader``
            (``pip install "accel-data[stateful]"``): it is then an instance of it, and its
            ``state_dict()`` is torchdata's state after the batches yielded (built by
            ``prepare_data_loader``: the position with that state under ``dataloader_state``).
        _drop_last: ``drop_last`` of the original DataLoader.
        _non_blocking: Move batches with ``non_blocking=True``.
        slice_fn: ``slice_fn(batch, slice, process_index, num_processes)`` returning the part of
            a global batch for one process (default: slice every tensor and per-sample list).
        torch_device_mesh: Must be None: dispatching the same batch to the ranks of a
            tensor-parallel group is not supported; prepare with ``dispatch_batches=False``.
        iteration: The epoch of the first pass.
        even_batches: Complete the last step with the fewest samples from the first one that
            cut it in equal parts (each process's last batch may be smaller than the others).
        device: Device the batches are moved to.
        num_processes: Number of processes (default: the state's).
        process_index: Index of this process (default: the state's).
        **kwargs: DataLoader arguments.
    """

    def __init__(
        self,
        dataset: Any,
        split_batches: bool = False,
        skip_batches: int = 0,
        use_stateful_dataloader: bool = False,
        _drop_last: bool = False,
        _non_blocking: bool = False,
        slice_fn: Callable[..., Any] | None = None,
        torch_device_mesh: Any = None,
        iteration: int = 0,
        *,
        even_batches: bool = True,
        device: torch.device | str | None = None,
        num_processes: int | None = None,
        process_index: int | None = None,
        **kwargs: Any,
    ) -> None:
        if torch_device_mesh is not None:
            raise ValueError(
                "DataLoaderDispatcher does not dispatch by device mesh (the same batch to every "
                f"rank of a tensor-parallel group); got torch_device_mesh={torch_device_mesh!r}. "
                "Prepare the loader with dispatch_batches=False and the mesh instead."
            )
        super().__init__(dataset, **kwargs)
        if num_processes is None or process_index is None:
            state = PartialState()
            num_processes = state.num_processes if num_processes is None else num_processes
            process_index = state.process_index if process_index is None else process_index
        self.num_processes = num_processes
        self.process_index = process_index
        self.split_batches = split_batches
        self.even_batches = even_batches
        self.slice_fn = slice_fn or _default_slice
        self.use_stateful_dataloader = use_stateful_dataloader
        self.device = torch.device(device) if device is not None else None
        self._non_blocking = _non_blocking
        self._drop_last = _drop_last
        self._init_position(iteration)
        self._restore_rng = False
        self.gradient_state = GradientState()
        if skip_batches:
            self.skip_batches = skip_batches
        base_size = self.batch_size
        if base_size is None and self.batch_sampler is not None:
            base_size = getattr(self.batch_sampler, "batch_size", None)
        if split_batches and base_size is not None:
            if base_size % num_processes != 0:
                raise ValueError(
                    f"split_batches needs a batch size that is a round multiple of the number "
                    f"of processes; got batch_size={base_size}, num_processes={num_processes}. "
                    f"Use a batch size of {math.ceil(base_size / num_processes) * num_processes} "
                    "or split_batches=False."
                )
        self._base_batch_size = base_size
        _set_loader_attribute(self, "drop_last", _drop_last)
        if base_size is not None:
            per_process = base_size // num_processes if split_batches else base_size
            _set_loader_attribute(self, "batch_size", per_process)

    @property
    def total_batch_size(self) -> int | None:
        """Samples in one step over all processes."""
        size = self._base_batch_size
        if size is None:
            return None
        return size if self.split_batches else size * self.num_processes

    @property
    def total_dataset_length(self) -> int:
        """Length of the dataset."""
        return len(self.dataset)  # type: ignore[arg-type]

    def __len__(self) -> int:
        length = super().__len__()
        if not self.split_batches:
            length = (
                length // self.num_processes
                if self._drop_last
                else math.ceil(length / self.num_processes)
            )
        return max(0, length - self.skip_batches)

    # ------------------------------------------------------------------- main process
    def _global_batches(self) -> Iterator[tuple[Any, int, int]]:
        """Main process: (global batch, real samples, padded size) per step."""
        # Creating the iterator draws its base seed from torch's global generator; a pass
        # resumed from a state dict drew it before the state was saved (see DataLoaderShard).
        rng = torch.get_rng_state() if self._restore_rng else None
        # The next class in line: DataLoader, or StatefulDataLoader for the stateful variant.
        batches = super().__iter__()
        if rng is not None:
            torch.set_rng_state(rng)
        n = 1 if self.split_batches else self.num_processes
        first: Any = None
        while True:
            parts = []
            for _ in range(n):
                try:
                    parts.append(next(batches))
                except StopIteration:
                    break
            if not parts:
                return
            batch = parts[0] if len(parts) == 1 else concat_batches(parts)
            real = find_batch_size(batch)
            if real is None:
                raise TypeError(
                    "dispatching needs batches with a batch dimension (tensors or per-sample "
                    f"lists); got a batch of type {type(batch).__name__}. Use "
                    "dispatch_batches=False."
                )
            if first is None:
                first = batch
            target = self.total_batch_size
            complete = len(parts) == n and (target is None or real >= target)
            if complete:
                yield batch, real, real
                continue
            if self._drop_last and not self.split_batches:
                return
            if self.even_batches:
                # The fewest repeated samples that give every process an equal part.
                size = math.ceil(real / self.num_processes) * self.num_processes
                yield _pad_from(batch, first, size - real), real, size
            else:
                yield batch, real, real
            return

    def _main_steps(self, skip: int) -> Iterator[tuple[Any, int, int]]:
        return _skip_iter(self._global_batches(), skip)

    # ---------------------------------------------------------------------- all ranks
    def _exchange(self, skip: int) -> Iterator[Any]:
        if self.num_processes > 1 and not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError(
                "dispatching batches needs an initialised process group; none is. Start the "
                "script with a launcher (torchrun or accel-launch) or pass dispatch_batches=False."
            )
        main = self.process_index == 0
        steps = self._main_steps(skip) if main else None
        pending = next(steps, None) if steps is not None else None
        while True:
            if main:
                self._capture_state()
                following = next(steps, None) if pending is not None else None  # type: ignore[arg-type]
                if pending is None:
                    header = _StepHeader(stop=True)
                else:
                    batch, real, size = pending
                    layout = map_tensors(lambda t: _TensorSpec(tuple(t.shape), t.dtype), batch)
                    header = _StepHeader(False, following is None, real, size, layout)
                header = broadcast_object(header)
            else:
                header = broadcast_object(None)
                batch = None
            if header.stop:
                return
            if not main:
                batch = _materialize(header.layout)
            batch = broadcast_tensors(batch)
            yield header, self._my_slice(batch, header)
            if header.last:
                return
            if main:
                pending = following

    def _my_slice(self, batch: Any, header: _StepHeader) -> Any:
        n, i = self.num_processes, self.process_index
        total = self.total_batch_size
        if self.even_batches and header.last:
            per = header.size // n  # the last step is cut in equal parts
        else:
            per = total // n if total is not None else math.ceil(header.size / n)
        return self.slice_fn(batch, slice(i * per, (i + 1) * per), i, n)

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        self._restore_rng, self._position.resumed = self._position.resumed, False
        skip = self._start_pass()
        self.begin()
        position = self._position
        try:
            steps = self._exchange(skip)
            for header, batch in steps:
                if header.last:
                    self.end_of_dataloader = True
                    self.remainder = self._real_remainder = header.real
                    self._last_step_size = header.size
                position.batches_yielded += 1
                yield self._place(batch)
            self._finish_pass()
        finally:
            self.end()


def _materialize(layout: Any) -> Any:
    if isinstance(layout, _TensorSpec):
        return torch.empty(layout.shape, dtype=layout.dtype)
    if isinstance(layout, (list, tuple)):
        items = [_materialize(x) for x in layout]
        if isinstance(layout, tuple) and hasattr(layout, "_fields"):
            return type(layout)(*items)
        return type(layout)(items)
    if isinstance(layout, dict):
        return type(layout)({k: _materialize(v) for k, v in layout.items()})
    return layout


def _pad_from(batch: Any, first: Any, count: int) -> Any:
    """Append ``count`` samples taken from ``first`` (cycled) to ``batch``."""
    if count <= 0:
        return batch
    first_size = find_batch_size(first) or 1
    repeats = math.ceil(count / first_size)
    filler = concat_batches([first] * repeats) if repeats > 1 else first
    return concat_batches([batch, slice_batch(filler, slice(0, count))])
