"""The torch objects a ``FullyShardedDataParallelPlugin`` holds after construction.

Users pass names (``"FULL_SHARD"``), 1-based numbers, torch enum members, dicts or torch
objects; the plugin keeps what torch's FSDP takes (``ShardingStrategy``, ``BackwardPrefetch``,
``StateDictType``, ``MixedPrecision`` / ``MixedPrecisionPolicy``, ``CPUOffload`` /
``OffloadPolicy``, state-dict configs, wrap-policy functions). ``torch.distributed.fsdp`` is
imported only when a plugin is built.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

import torch

from .._env._contract import BACKWARD_PREFETCH, SHARDING_STRATEGIES, STATE_DICT_TYPES, WRAP_POLICIES

MIXED_PRECISION_DTYPES: dict[str, torch.dtype] = {
    "fp8": torch.bfloat16,
    "fp16": torch.float16,
    "float16": torch.float16,
    "bf16": torch.bfloat16,
    "bfloat16": torch.bfloat16,
    "fp32": torch.float32,
    "float32": torch.float32,
}
"""Precision names accepted by ``mixed_precision_policy`` (FP8 keeps bf16 parameters)."""


def choice(value: Any, field: str, choices: tuple[str, ...]) -> str:
    """Normalise a torch enum member, its name, or a 1-based number to one of ``choices``.

    Raises:
        ValueError: naming the field, the value and the accepted names.
    """
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= len(choices):
        return choices[value - 1]
    text = getattr(value, "name", value) if isinstance(value, Enum) else value
    text = str(text).strip().upper().lstrip("_")
    if text.isdecimal() and 1 <= int(text) <= len(choices):
        return choices[int(text) - 1]
    if text not in choices:
        raise ValueError(
            f"FullyShardedDataParallelPlugin.{field} must be one of {', '.join(choices)}; got "
            f"{value!r}. Pass one of these names (or the torch enum member)."
        )
    return text


def name_of(value: Any) -> str | None:
    """The name of a torch FSDP enum member (or the name itself); None stays None."""
    if value is None:
        return None
    return str(getattr(value, "name", value)).upper().lstrip("_")


def sharding_strategy(value: Any, field: str = "sharding_strategy") -> Any:
    """A ``torch.distributed.fsdp.ShardingStrategy`` member."""
    from torch.distributed.fsdp import ShardingStrategy

    if isinstance(value, ShardingStrategy):
        return value
    return ShardingStrategy(
        SHARDING_STRATEGIES.index(choice(value, field, SHARDING_STRATEGIES)) + 1
    )


def backward_prefetch(value: Any) -> Any:
    """A ``torch.distributed.fsdp.BackwardPrefetch`` member, or None for ``NO_PREFETCH``."""
    from torch.distributed.fsdp import BackwardPrefetch

    if value is None or isinstance(value, BackwardPrefetch):
        return value
    name = choice(value, "backward_prefetch", BACKWARD_PREFETCH)
    return None if name == "NO_PREFETCH" else BackwardPrefetch[name]


def state_dict_type(value: Any) -> Any:
    """A ``torch.distributed.fsdp.StateDictType`` member."""
    from torch.distributed.fsdp import StateDictType

    if isinstance(value, StateDictType):
        return value
    return StateDictType[choice(value, "state_dict_type", STATE_DICT_TYPES)]


def state_dict_configs(kind: Any) -> tuple[Any, Any]:
    """The default model and optimizer state-dict configs of a ``StateDictType`` (CPU offload;
    full state dicts on process 0 only); ``(None, None)`` for ``LOCAL_STATE_DICT``."""
    from torch.distributed.fsdp import (
        FullOptimStateDictConfig,
        FullStateDictConfig,
        ShardedOptimStateDictConfig,
        ShardedStateDictConfig,
    )

    if kind.name == "FULL_STATE_DICT":
        return (
            FullStateDictConfig(offload_to_cpu=True, rank0_only=True),
            FullOptimStateDictConfig(offload_to_cpu=True, rank0_only=True),
        )
    if kind.name == "SHARDED_STATE_DICT":
        return ShardedStateDictConfig(offload_to_cpu=True), ShardedOptimStateDictConfig(
            offload_to_cpu=True
        )
    return None, None


def _dtype(value: Any, where: str) -> torch.dtype:
    if isinstance(value, torch.dtype):
        return value
    dtype = MIXED_PRECISION_DTYPES.get(str(value).lower())
    if dtype is None:
        raise ValueError(
            f"FullyShardedDataParallelPlugin.{where} must be a torch dtype or one of "
            f"{', '.join(MIXED_PRECISION_DTYPES)}; got {value!r}. Use e.g. 'bf16' or "
            "torch.bfloat16."
        )
    return dtype


def mixed_precision_class(version: int) -> type:
    """``MixedPrecision`` (FSDP1) or ``MixedPrecisionPolicy`` (FSDP2)."""
    if version == 2:
        from torch.distributed.fsdp import MixedPrecisionPolicy

        return MixedPrecisionPolicy
    from torch.distributed.fsdp import MixedPrecision

    return MixedPrecision


def mixed_precision(value: Any, version: int, buffer_autocast: bool = False) -> Any:
    """A ``MixedPrecision`` / ``MixedPrecisionPolicy`` from a precision name, a dtype, a dict of
    dtypes (or names), or the torch object itself (None stays None)."""
    cls = mixed_precision_class(version)
    if value is None or isinstance(value, cls):
        return value
    keys = ("param_dtype", "reduce_dtype") + (
        ("buffer_dtype",) if version == 1 else ("output_dtype",)
    )
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(keys))
        if unknown:
            raise ValueError(
                f"FullyShardedDataParallelPlugin.mixed_precision_policy with fsdp_version="
                f"{version} takes the keys {', '.join(keys)}; got {unknown}. Drop them (or "
                "pass a torch MixedPrecision / MixedPrecisionPolicy)."
            )
        return cls(
            **{
                k: None if v is None else _dtype(v, f"mixed_precision_policy[{k!r}]")
                for k, v in value.items()
            }
        )
    if isinstance(value, (str, torch.dtype)):
        dtype = _dtype(value, "mixed_precision_policy")
        args = {"param_dtype": dtype, "reduce_dtype": dtype}
        if version == 1:
            args["buffer_dtype"] = torch.float32 if buffer_autocast else dtype
        else:
            args["output_dtype"] = dtype
        return cls(**args)
    other = "MixedPrecision" if version == 2 else "MixedPrecisionPolicy"
    raise ValueError(
        f"FullyShardedDataParallelPlugin.mixed_precision_policy with fsdp_version={version} "
        f"must be a {cls.__name__}, a dict of dtypes, a dtype or a precision name; got "
        f"{value!r}. Pass a {cls.__name__} (a {other} belongs to the other FSDP version)."
    )


def cpu_offload(value: Any, version: int) -> Any:
    """``CPUOffload`` (FSDP1) or ``OffloadPolicy`` / ``CPUOffloadPolicy`` (FSDP2) from a bool
    or the torch object itself."""
    from torch.distributed.fsdp import CPUOffload, CPUOffloadPolicy, OffloadPolicy

    if version == 2:
        if isinstance(value, OffloadPolicy):
            return value
        if isinstance(value, bool):
            return CPUOffloadPolicy() if value else OffloadPolicy()
        wanted = "a bool or an OffloadPolicy / CPUOffloadPolicy"
    else:
        if isinstance(value, CPUOffload):
            return value
        if isinstance(value, bool):
            return CPUOffload(offload_params=value)
        wanted = "a bool or a CPUOffload"
    raise ValueError(
        f"FullyShardedDataParallelPlugin.cpu_offload with fsdp_version={version} must be "
        f"{wanted}; got {value!r}. Pass True / False."
    )


def offloads(value: Any) -> bool:
    """Whether a ``cpu_offload`` value (bool, ``CPUOffload``, ``OffloadPolicy``) keeps
    parameters on the CPU."""
    if isinstance(value, bool) or value is None:
        return bool(value)
    if type(value).__name__ == "CPUOffloadPolicy":
        return True
    return bool(getattr(value, "offload_params", False))


def wrap_policy_function(name: str) -> Any:
    """torch's policy function for a wrap-policy name (None for ``NO_WRAP``)."""
    from torch.distributed.fsdp.wrap import (
        size_based_auto_wrap_policy,
        transformer_auto_wrap_policy,
    )

    name = choice(name, "auto_wrap_policy", WRAP_POLICIES)
    return {
        "TRANSFORMER_BASED_WRAP": transformer_auto_wrap_policy,
        "SIZE_BASED_WRAP": size_based_auto_wrap_policy,
        "NO_WRAP": None,
    }[name]


def wrap_policy_name(policy: Any) -> str | None:
    """``TRANSFORMER_BASED_WRAP`` / ``SIZE_BASED_WRAP`` / ``NO_WRAP`` for torch's unbound policy
    functions (and the names themselves); None for any other callable."""
    from torch.distributed.fsdp.wrap import (
        size_based_auto_wrap_policy,
        transformer_auto_wrap_policy,
    )

    if policy is None:
        return "NO_WRAP"
    if policy is transformer_auto_wrap_policy:
        return "TRANSFORMER_BASED_WRAP"
    if policy is size_based_auto_wrap_policy:
        return "SIZE_BASED_WRAP"
    if isinstance(policy, str):
        return choice(policy, "auto_wrap_policy", WRAP_POLICIES)
    return None
