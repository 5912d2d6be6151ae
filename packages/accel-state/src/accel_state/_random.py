"""Seeding and synchronising random number generators across processes."""

from __future__ import annotations

import random
from collections.abc import Iterable

import numpy as np
import torch
import torch.distributed as dist

from ._enums import RNGType
from ._state import PartialState


def set_seed(seed: int, device_specific: bool = False, deterministic: bool = False) -> None:
    """Seed ``random``, ``numpy`` and ``torch`` (every device) for reproducible runs.

    Args:
        seed: The seed.
        device_specific: Add the process index to the seed so each process draws differently.
        deterministic: Also ask torch for deterministic algorithms.
    """
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"set_seed needs an int seed; got {seed!r}. Pass e.g. set_seed(42).")
    if device_specific:
        seed += PartialState().process_index
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if deterministic:
        torch.use_deterministic_algorithms(True)


def _get_state(rng_type: RNGType, generator: torch.Generator | None) -> torch.Tensor:
    if rng_type is RNGType.TORCH:
        return torch.get_rng_state()
    if rng_type is RNGType.CUDA:
        return torch.cuda.get_rng_state()
    if rng_type is RNGType.XPU:
        return torch.xpu.get_rng_state()
    if rng_type is RNGType.GENERATOR:
        if generator is None:
            raise ValueError(
                "synchronize_rng_state('generator') needs the generator; got None. "
                "Pass generator=my_generator."
            )
        return generator.get_state()
    raise ValueError(
        f"rng_type {rng_type.value!r} is not supported on this machine; "
        "use 'torch', 'cuda', 'xpu' or 'generator'."
    )


def _set_state(rng_type: RNGType, state: torch.Tensor, generator: torch.Generator | None) -> None:
    if rng_type is RNGType.TORCH:
        torch.set_rng_state(state)
    elif rng_type is RNGType.CUDA:
        torch.cuda.set_rng_state(state)
    elif rng_type is RNGType.XPU:
        torch.xpu.set_rng_state(state)
    elif generator is not None:
        generator.set_state(state)


def synchronize_rng_state(
    rng_type: str | RNGType | None = None, generator: torch.Generator | None = None
) -> None:
    """Copy the main process's state of one generator to every process.

    Args:
        rng_type: ``"torch"``, ``"cuda"``, ``"xpu"`` or ``"generator"`` (default ``"torch"``).
        generator: The generator to synchronise when ``rng_type="generator"``.
    """
    kind = RNGType.parse(rng_type or RNGType.TORCH, "rng_type")
    state = PartialState()
    if not state.use_distributed:
        return
    rng = _get_state(kind, generator)
    device = state.device if state.backend == "nccl" else torch.device("cpu")
    rng = rng.to(device)
    dist.broadcast(rng, src=0)
    _set_state(kind, rng.cpu(), generator)


def synchronize_rng_states(
    rng_types: Iterable[str | RNGType], generator: torch.Generator | None = None
) -> None:
    """Synchronise each generator of ``rng_types`` from the main process."""
    for rng_type in rng_types:
        synchronize_rng_state(rng_type, generator=generator)
