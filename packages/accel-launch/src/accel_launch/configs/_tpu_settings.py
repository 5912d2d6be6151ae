"""The TPU / XLA settings of the config file, and the rules they follow.

The keys are the reference library's (``tpu_use_cluster``, ``tpu_name``, ``tpu_zone``,
``tpu_use_sudo``, ``tpu_vm``, ``tpu_env``, ``commands``, ``command_file``,
``main_training_function``, ``downcast_bf16``). ``accel launch`` reads them for an XLA run (the
file's ``distributed_type: XLA``, or ``--tpu`` / ``--tpu_cluster``), ``accel tpu-config`` reads
the pod and its commands; a flag always wins over the file.
"""

from __future__ import annotations

import re
from typing import Any

from .._errors import ConfigError

TPU_FIELDS: dict[str, Any] = {
    "downcast_bf16": False,
    "main_training_function": "main",
    "tpu_use_cluster": False,
    "tpu_name": None,
    "tpu_zone": None,
    "tpu_use_sudo": False,
    "tpu_vm": None,
    "tpu_env": None,
    "command_file": None,
    "commands": None,
}
"""Each TPU setting and its "not set" value (the config model's default)."""

ANY_RUN = ("tpu_name", "tpu_zone", "commands", "command_file")
"""Settings ``accel tpu-config`` reads whatever the run's distributed type."""

XLA_PRECISIONS = ("no", "bf16")
"""Mixed precision values an XLA run takes (bf16 through torch_xla's variables)."""

_TPU_NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
_TPU_ZONE = re.compile(r"[a-z]+-[a-z]+[0-9]+-[a-z]")
_WORKER = re.compile(r"[A-Za-z0-9_.-]+")


def check_tpu_settings(config: Any) -> None:
    """Check the TPU settings of a launch config together with its distributed type.

    Raises:
        ConfigError: naming the setting, its value and the fix.
    """
    distributed = str(config.distributed_type)
    if distributed != "XLA":
        for name, off in TPU_FIELDS.items():
            value = getattr(config, name)
            if value != off and name not in ANY_RUN:
                raise ConfigError(
                    f"{name} applies to TPU / XLA runs only; got {name}={value!r} with "
                    f"distributed_type {distributed}. Set distributed_type: XLA (or pass --tpu), "
                    f"or delete the setting (its default is {off!r})."
                )
    if distributed == "XLA" and config.mixed_precision not in XLA_PRECISIONS:
        raise ConfigError(
            f"an XLA run takes mixed_precision 'no' or 'bf16' (torch_xla computes in bf16 "
            f"through XLA_USE_BF16 / XLA_DOWNCAST_BF16); got {config.mixed_precision!r}. Use bf16."
        )
    if config.downcast_bf16 and config.mixed_precision != "bf16":
        raise ConfigError(
            "downcast_bf16 chooses how bf16 mixed precision runs on XLA (float32 to bf16, "
            "float64 to float32); got downcast_bf16=true with mixed_precision="
            f"{config.mixed_precision!r}. Set mixed_precision: bf16, or downcast_bf16: false."
        )
    function = config.main_training_function
    if not isinstance(function, str) or not function.isidentifier():
        raise ConfigError(
            "main_training_function is the name of the function of the script that each XLA "
            f"process runs, a Python identifier; got {function!r}. Use e.g. main."
        )
    check_pod(config.tpu_name, config.tpu_zone)
    for worker in config.tpu_vm or []:
        _check_pattern(worker, "tpu_vm (--vm)", _WORKER, "0", "a worker index or VM name")
    env_pairs(config.tpu_env or [])
    if config.commands and config.command_file:
        raise ConfigError(
            "the commands run on each TPU VM come from commands or from command_file, not both; "
            f"got commands={config.commands!r} and command_file={config.command_file!r}. "
            "Keep one of them."
        )


def check_pod(name: str | None, zone: str | None) -> None:
    """A TPU pod's name and zone, when given, are what Google Cloud accepts.

    Raises:
        ConfigError: naming the value and an example of a valid one.
    """
    what = "lowercase letters, digits and hyphens, starting with a letter (at most 63)"
    _check_pattern(name, "tpu_name", _TPU_NAME, "my-tpu-pod", what)
    _check_pattern(zone, "tpu_zone", _TPU_ZONE, "us-central2-b", "a Google Cloud zone")


def _check_pattern(
    value: str | None, name: str, pattern: re.Pattern[str], example: str, what: str
) -> None:
    if value is not None and not pattern.fullmatch(str(value)):
        raise ConfigError(f"{name} must be {what}; got {value!r}. Use e.g. {example}.")


def env_pairs(values: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` items (``tpu_env`` / ``--env``) as a mapping.

    Raises:
        ConfigError: for an item without ``=`` or whose key is not a variable name.
    """
    out = {}
    for item in values:
        key, sep, value = str(item).partition("=")
        if not sep or not key.isidentifier():
            raise ConfigError(
                f"tpu_env (--env) items are KEY=VALUE with KEY a variable name; got {item!r}. "
                "Use e.g. --env XLA_USE_BF16=1."
            )
        out[key] = value
    return out


def xla_precision_environment(mixed_precision: str, downcast_bf16: bool) -> dict[str, str]:
    """torch_xla's variables for bf16 mixed precision: ``XLA_DOWNCAST_BF16=1`` with
    ``downcast_bf16``, else ``XLA_USE_BF16=1``; nothing without bf16."""
    if mixed_precision != "bf16":
        return {}
    return {"XLA_DOWNCAST_BF16": "1"} if downcast_bf16 else {"XLA_USE_BF16": "1"}


__all__ = [
    "ANY_RUN",
    "TPU_FIELDS",
    "XLA_PRECISIONS",
    "check_pod",
    "check_tpu_settings",
    "env_pairs",
    "xla_precision_environment",
]
