"""TPU / XLA through ``torch_xla``: whether this process uses it, and what its replica is.

A process uses XLA when ``torch_xla`` is importable and ``USE_TORCH_XLA`` is not set to a false
value (the reference library's switch, read the same way). ``torch_xla`` is imported only when
a state is created on it; asking whether it is available imports nothing.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._env._launcher import parse_flag_from_env

USE_TORCH_XLA: bool = parse_flag_from_env("USE_TORCH_XLA", default=True)
"""Whether ``torch_xla`` may be used (``USE_TORCH_XLA``, read once at import; default True).
Set ``USE_TORCH_XLA=0`` to train with plain torch where ``torch_xla`` is installed."""

if TYPE_CHECKING:
    import torch

XLA_ENV_SCRIPT = "tools/xla_env.py"
"""The repository script that builds an environment with ``torch_xla`` (torch 2.9)."""


def torch_xla_usable() -> bool:
    """Whether ``torch_xla`` is installed and not switched off by ``USE_TORCH_XLA=0``.

    The variable is read now (not only at import), so a test or a launcher can switch it.
    """
    if not parse_flag_from_env("USE_TORCH_XLA", default=True):
        return False
    return importlib.util.find_spec("torch_xla") is not None


def xla_device_type() -> str | None:
    """The PJRT device type of ``torch_xla`` (``"TPU"``, ``"CPU"``, ``"CUDA"`` ...), or None
    when ``torch_xla`` is not usable."""
    if not torch_xla_usable():
        return None
    import torch_xla.runtime as xr

    kind = xr.device_type()
    return None if kind is None else str(kind)


def xla_missing_message(got: str) -> str:
    """The refusal of an XLA run where ``torch_xla`` cannot be used: rule, value, fix."""
    switched_off = importlib.util.find_spec("torch_xla") is not None
    why = (
        "torch_xla is installed but USE_TORCH_XLA is set to a false value"
        if switched_off
        else "torch_xla is not installed"
    )
    fix = (
        "Unset USE_TORCH_XLA (or set it to 1)"
        if switched_off
        else "Install torch_xla matching your torch (pip install torch-xla; the repository's "
        f"{XLA_ENV_SCRIPT} builds such an environment, on the CPU with PJRT_DEVICE=CPU)"
    )
    return f"TPU / XLA runs need torch_xla, but {why}; got {got}. {fix}."


@dataclass(frozen=True)
class XlaReplica:
    """Where this process stands in an XLA run."""

    num_processes: int
    """Number of replicas (``torch_xla.runtime.world_size()``)."""
    process_index: int
    """Global ordinal of this replica."""
    local_process_index: int
    """Ordinal of this replica on its machine."""
    num_processes_per_node: int
    """Replicas on this machine."""
    device: torch.device
    """The XLA device of this replica."""


def xla_replica() -> XlaReplica:
    """Set up replication over the addressable XLA devices and describe this replica.

    Raises:
        RuntimeError: if ``torch_xla`` is not usable (the message says how to get it).
        NotImplementedError: if this process drives several XLA devices (one thread each).
    """
    if not torch_xla_usable():
        raise RuntimeError(xla_missing_message("a state created on XLA"))
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.runtime as xr

    addressable = int(xr.addressable_device_count())
    if addressable > 1:
        raise NotImplementedError(
            "accel runs one XLA replica per process (its state is per process, not per "
            f"thread); got {addressable} XLA devices addressable from this process (torch_xla's "
            "thread-per-device mode: TPU v2/v3, or CPU_NUM_DEVICES > 1). Run one device per "
            "process (TPU v4 and later do), or set CPU_NUM_DEVICES=1 on the CPU."
        )
    device = torch_xla.device()
    xm.set_replication(device, xm.get_xla_supported_devices())
    local = int(xr.local_ordinal())
    per_node = int(os.environ.get("PJRT_LOCAL_PROCESS_COUNT", 0) or 0) or max(
        1, int(xr.addressable_device_count())
    )
    return XlaReplica(
        num_processes=int(xr.world_size()),
        process_index=int(xr.global_ordinal()),
        local_process_index=local,
        num_processes_per_node=per_node,
        device=device,
    )


def xla_rendezvous(tag: str) -> None:
    """Block until every XLA replica reaches ``tag`` (``xm.rendezvous``)."""
    import torch_xla.core.xla_model as xm

    xm.rendezvous(tag)


def xla_mark_step() -> None:
    """Cut the lazy graph here and run it (``xm.mark_step``)."""
    import torch_xla.core.xla_model as xm

    xm.mark_step()


def xla_model() -> Any:
    """``torch_xla.core.xla_model`` (imported now), for the packages that run collectives."""
    return torch_xla_module("core.xla_model")


def torch_xla_module(name: str) -> Any:
    """Import ``torch_xla.<name>`` now (``"distributed.parallel_loader"`` ...), so the other
    packages reach torch_xla through this one only.

    Raises:
        RuntimeError: if ``torch_xla`` is not usable (the message says how to get it).
    """
    if not torch_xla_usable():
        raise RuntimeError(xla_missing_message(f"a use of torch_xla.{name}"))
    return importlib.import_module(f"torch_xla.{name}")


__all__ = [
    "USE_TORCH_XLA",
    "XLA_ENV_SCRIPT",
    "XlaReplica",
    "torch_xla_module",
    "torch_xla_usable",
    "xla_device_type",
    "xla_mark_step",
    "xla_missing_message",
    "xla_model",
    "xla_rendezvous",
    "xla_replica",
]
