"""Bringing config files of older formats up to date (``accel config update``).

Format history:

- version 0 (no ``config_version`` key): files written by the reference library. Their
  ``dynamo_backend`` is a top-level key, MPI settings sit under ``mpirun_config`` (a launcher
  backend's setting names the section it replaces: ``ConfigField.replaces``), FSDP's
  sharding strategy may be a number and its prefetch key is ``fsdp_backward_prefetch_policy``.
- version 1: the first accel files; sections were free-form mappings.
- version 2: typed, validated sections (`accel_launch.configs._engine_configs`).
"""

from __future__ import annotations

import copy
from typing import Any

CONFIG_VERSION = 2
"""The format this accel-launch writes."""

IGNORED_KEYS = frozenset(
    {
        "enable_cpu_affinity",
        "ipex_config",
        "mpirun_ccl",
    }
)
"""Keys the reference library writes that mean nothing here: accepted when reading, dropped by
``accel config update``."""

_SHARDING_BY_NUMBER = {
    1: "FULL_SHARD",
    2: "SHARD_GRAD_OP",
    3: "NO_SHARD",
    4: "HYBRID_SHARD",
    5: "HYBRID_SHARD_ZERO2",
}
_RENAMED_FSDP_KEYS = {"fsdp_backward_prefetch_policy": "fsdp_backward_prefetch"}
_TOP_LEVEL_DYNAMO = ("dynamo_backend", "dynamo_mode", "dynamo_use_fullgraph", "dynamo_use_dynamic")


def _replaced_sections() -> list[tuple[str, str]]:
    """``(setting, "section.key")`` of the launcher backends' settings that replace a section
    of an older format (``mpirun_config.mpirun_hostfile`` became ``mpirun_hostfile``)."""
    from ..launchers._launcher_registry import launcher_fields

    return [(k, v.replaces) for k, v in launcher_fields().items() if v.replaces is not None]


def migrate(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Rewrite an older file's mapping in the current format.

    Args:
        data: The mapping read from the file (left unchanged).

    Returns:
        The updated mapping and one line per change made (empty when already current).
    """
    if not isinstance(data, dict):
        return data, []  # not a mapping: config_from_dict refuses it with the rule
    out = copy.deepcopy(data)
    changes: list[str] = []
    for key in _TOP_LEVEL_DYNAMO:
        dynamo = out.get("dynamo_config") or {}
        if key in out and isinstance(dynamo, dict):
            dynamo.setdefault(key, out.pop(key))
            out["dynamo_config"] = dynamo
            changes.append(f"moved top-level {key} into dynamo_config")
    for name, old in _replaced_sections():  # settings a launcher backend took over
        section, key = old.split(".", 1)
        values = out.pop(section, None)
        if values is not None:
            if isinstance(values, dict) and values.get(key):
                out.setdefault(name, values[key])
            changes.append(f"replaced {section} by {name}")
    fsdp = out.get("fsdp_config")
    if isinstance(fsdp, dict):
        for old, new in _RENAMED_FSDP_KEYS.items():
            if old in fsdp:
                fsdp.setdefault(new, fsdp.pop(old))
                changes.append(f"renamed fsdp_config.{old} to {new}")
        strategy = fsdp.get("fsdp_sharding_strategy")
        if isinstance(strategy, int) and strategy in _SHARDING_BY_NUMBER:
            fsdp["fsdp_sharding_strategy"] = _SHARDING_BY_NUMBER[strategy]
            changes.append(
                f"fsdp_config.fsdp_sharding_strategy {strategy} -> {_SHARDING_BY_NUMBER[strategy]}"
            )
    for key in sorted(IGNORED_KEYS & set(out)):
        del out[key]
        changes.append(f"dropped {key} (not used by accel)")
    for key in ("dynamo_config", "deepspeed_config", "fsdp_config", "megatron_lm_config"):
        if key in out and out[key] is None:
            out[key] = {}
    version = out.get("config_version", 0)
    if not isinstance(version, int) or version < CONFIG_VERSION:
        out["config_version"] = CONFIG_VERSION
        changes.append(f"config_version {version} -> {CONFIG_VERSION}")
    return out, changes
