"""The work of the ``Accelerator``'s operations that hold more than a call: the trigger check,
freeing memory, joining uneven inputs and profiling."""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from accel_state import ProfileKwargs
    from torch.distributed.algorithms.join import Joinable

    from ._accelerator import Accelerator


def check_trigger(acc: Accelerator) -> bool:
    from accel_collectives import reduce

    flag = (
        acc.flag_tensor if acc.flag_tensor is not None else torch.tensor(0, device=acc.state.device)
    )
    flag = reduce(flag, reduction="sum")  # a copy: the raised flag is reset below
    if int(flag.item()) >= 1:
        acc.flag_tensor = torch.tensor(0, device=acc.state.device)
        return True
    return False


def free_memory(acc: Accelerator, *objects: object) -> list[None]:
    from accel_state import release_memory

    acc._prepared.clear()
    acc.engine.release()
    acc.step = 0
    return release_memory(*objects)  # one full garbage collection, then the device caches


@contextlib.contextmanager
def join_uneven_inputs(
    acc: Accelerator, joinables: list[Joinable], even_batches: bool | None = None
) -> Iterator[None]:
    from accel_data import override_even_batches
    from torch.distributed.algorithms.join import Join

    if not acc.state.use_distributed:
        yield
        return
    kind = getattr(acc.state.distributed_type, "value", str(acc.state.distributed_type))
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
    with override_even_batches(acc._prepared.dataloaders, even_batches), Join(joinables):
        yield


@contextlib.contextmanager
def profile(
    acc: Accelerator, profile_handler: ProfileKwargs | None = None
) -> Iterator[torch.profiler.profile]:
    from accel_state import ProfileKwargs

    handler = profile_handler or acc._handler(ProfileKwargs) or ProfileKwargs()
    profiler = handler.build()
    with profiler as prof:
        yield prof
    if handler.output_trace_dir:
        os.makedirs(handler.output_trace_dir, exist_ok=True)
        prof.export_chrome_trace(
            os.path.join(handler.output_trace_dir, f"trace_rank_{acc.state.process_index}.json")
        )
