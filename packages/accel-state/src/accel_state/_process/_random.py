"""Seeding and synchronising random number generators across processes."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from .._enums import RNGType
from .._machine._families import accelerator_module, family_available
from ._partial_state import PartialState


def set_seed(seed: int, device_specific: bool = False, deterministic: bool = False) -> None:
    """Seed ``random``, ``numpy`` and ``torch`` for reproducible runs, and every device of
    this machine's accelerator family (``torch.npu.manual_seed_all`` on an Ascend machine,
    ``torch.cuda.manual_seed_all`` on CUDA ...).

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
    accelerator = accelerator_module()
    if accelerator is not None:
        accelerator[1].manual_seed_all(seed)  # type: ignore[attr-defined]
    if deterministic:
        torch.use_deterministic_algorithms(True)


_DEVICE_RNGS = {
    RNGType.CUDA: "cuda",
    RNGType.XPU: "xpu",
    RNGType.NPU: "npu",
    RNGType.MLU: "mlu",
    RNGType.SDAA: "sdaa",
    RNGType.MUSA: "musa",
    RNGType.HPU: "hpu",
    RNGType.NEURON: "neuron",
}


def _device_rng(rng_type: RNGType) -> Any:
    """``torch.<device>`` holding the generator of ``rng_type``, refused when absent here."""
    device = _DEVICE_RNGS.get(rng_type)
    if device is None:
        raise ValueError(
            f"rng_type must be one of {['torch', 'generator', *_DEVICE_RNGS.values()]}; got "
            f"{rng_type.value!r}. Pass one of them ('xla' needs TPU support, which this version "
            "does not have)."
        )
    if not family_available(device):
        raise ValueError(
            f"rng_type {device!r} synchronises the {device.upper()} generator, and this machine "
            f"has no {device.upper()} (torch.{device} is not available); got rng_type="
            f"{device!r}. Use 'torch' or 'generator', or run on a machine with that device."
        )
    return getattr(torch, device)


def _get_state(rng_type: RNGType, generator: torch.Generator | None) -> torch.Tensor:
    if rng_type is RNGType.TORCH:
        return torch.get_rng_state()
    if rng_type is RNGType.GENERATOR:
        if generator is None:
            raise ValueError(
                "synchronize_rng_state('generator') needs the generator; got None. "
                "Pass generator=my_generator."
            )
        return generator.get_state()
    return _device_rng(rng_type).get_rng_state()


def _set_state(rng_type: RNGType, state: torch.Tensor, generator: torch.Generator | None) -> None:
    if rng_type is RNGType.TORCH:
        torch.set_rng_state(state)
    elif rng_type is RNGType.GENERATOR:
        if generator is not None:
            generator.set_state(state)
    else:
        _device_rng(rng_type).set_rng_state(state)


def synchronize_rng_state(
    rng_type: str | RNGType | None = None, generator: torch.Generator | None = None
) -> None:
    """Copy the main process's state of one generator to every process.

    Args:
        rng_type: ``"torch"`` (default), ``"generator"``, or the generator of a device family
            present here: ``"cuda"``, ``"xpu"``, ``"npu"``, ``"mlu"``, ``"sdaa"``, ``"musa"``,
            ``"hpu"``, ``"neuron"``.
        generator: The generator to synchronise when ``rng_type="generator"``.
    """
    kind = RNGType.parse(rng_type or RNGType.TORCH, "rng_type")
    rng = _get_state(kind, generator)
    state = PartialState()
    if not state.use_distributed:
        return
    # Collective backends of accelerators move device tensors; gloo and MPI move CPU ones.
    on_cpu = state.backend in ("gloo", "mpi") or state.device.type in ("cpu", "mps")
    device = torch.device("cpu") if on_cpu else state.device
    rng = rng.to(device)
    dist.broadcast(rng, src=0)
    _set_state(kind, rng.cpu(), generator)


def synchronize_rng_states(
    rng_types: Iterable[str | RNGType], generator: torch.Generator | None = None
) -> None:
    """Synchronise each generator of ``rng_types`` from the main process."""
    for rng_type in rng_types:
        synchronize_rng_state(rng_type, generator=generator)


def capture_rng_state() -> dict[str, Any]:
    """The states of python's, numpy's and torch's (CPU and CUDA) generators.

    Numpy's key is stored as a tensor and every other value as a number, a string or a tuple,
    so the result saves with ``torch.save`` and loads back with ``torch.load(weights_only=True)``.

    Returns:
        ``{"random_state", "numpy_random_seed", "torch_manual_seed"[, "torch_cuda_manual_seed"]}``
        (CUDA only when it is initialised), for [`restore_rng_state`][accel_state.restore_rng_state].
    """
    kind, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "random_state": random.getstate(),
        "numpy_random_seed": {
            "kind": str(kind),
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch_manual_seed": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["torch_cuda_manual_seed"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: Mapping[str, Any]) -> None:
    """Put back the generator states returned by [`capture_rng_state`][accel_state.capture_rng_state].

    Entries that are absent are left as they are (a state saved without CUDA restores the rest).
    """
    if "random_state" in state:
        random.setstate(_as_tuple(state["random_state"]))
    numpy_state = state.get("numpy_random_seed")
    if isinstance(numpy_state, Mapping):
        np.random.set_state(
            (
                numpy_state["kind"],
                numpy_state["keys"].numpy().astype(np.uint32),
                numpy_state["pos"],
                numpy_state["has_gauss"],
                numpy_state["cached_gaussian"],
            )
        )
    if "torch_manual_seed" in state:
        torch.set_rng_state(state["torch_manual_seed"])
    cuda = state.get("torch_cuda_manual_seed")
    if cuda is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda)


def _as_tuple(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_as_tuple(v) for v in value)
    return value
