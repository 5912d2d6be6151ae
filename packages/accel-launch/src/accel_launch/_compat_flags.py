"""Flags of ``accelerate launch`` beyond accel's own: refused features and SageMaker's
credentials (torchrun's pass-through options are declared by its backend, ``launchers._torchrun``).

A command line written for the reference launcher runs as ``accel launch`` after the word is
replaced: each of its flags is either honoured (passed to torchrun) or refused with a message
that names the flag, says why, and gives the way to get the same result.
"""

from __future__ import annotations

import argparse
from typing import Any

from .configs._config_file import ConfigError

REFUSED: dict[str, str] = {
    "enable_cpu_affinity": "pinning each process to the CPUs of its GPU's NUMA node is not "
    "implemented by this version. Drop --enable_cpu_affinity (on CPU, --num_cpu_threads_per_"
    "process sets the threads of each process).",
    "deepspeed_moe_layer_cls_names": "the launcher cannot pass mixture-of-experts layer names "
    "to DeepSpeed in this version. Drop the flag and pass "
    "DeepSpeedPlugin(transformer_moe_cls_names='MyMoELayer') to the Accelerator in the "
    "script.",
    "fsdp_activation_checkpointing_offload": "the launcher does not pass activation offload "
    "to the processes in this version. Drop the flag and pass FullyShardedDataParallelPlugin("
    "activation_checkpointing=True, activation_checkpointing_offload=True) in the script (or "
    "set ACCEL_FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD=1).",
    "fp8": "the launcher does not pass FP8 recipe settings to the processes in this version. "
    "Keep --mixed_precision fp8, drop the --fp8_* flags, and pass the recipe as a kwargs "
    "handler in the script (e.g. Accelerator(mixed_precision='fp8', "
    "kwargs_handlers=[AORecipeKwargs(...)])).",
    "aws": "the --aws_* flags submit a SageMaker job, and this launch runs on this machine "
    "(its config file has no `compute_environment: AMAZON_SAGEMAKER`). Drop them, or write a "
    "SageMaker config with `accel config` and pass it with --config_file.",
}
"""Reason and fix for each refused feature, by flag name or family prefix."""

_FP8: dict[str, type | list[str]] = {
    "backend": ["ao", "te", "msamp"],
    "margin": int,
    "interval": int,
    "format": ["HYBRID", "E4M3", "E5M2"],
    "amax_history_len": int,
    "amax_compute_algo": ["max", "most_recent"],
    "override_linear_precision": str,
    "opt_level": ["O1", "O2"],
    "enable_fsdp_float8_all_gather": str,
    "pad_inner_dim": str,
}


def _shown(value: object) -> str:
    """``value`` as it may appear in a one-line message (quoted when it has control characters)."""
    return str(value) if str(value).isprintable() else repr(value)


def _family(flag: str) -> str:
    """The key of `REFUSED` for a refused flag."""
    if flag.startswith("fp8_"):
        return "fp8"
    if flag.startswith("aws_"):
        return "aws"
    return flag


def _typed(kind: type | list[str]) -> dict[str, Any]:
    if isinstance(kind, list):
        return {"choices": kind}
    from .launchers._launcher_base import integer

    return {"type": integer if kind is int else str}


def add_compat_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the torchrun pass-through flags (declared by the torchrun backend), the refused
    flags of the reference launcher and SageMaker's credentials."""
    from .launchers._torchrun import add_pass_through_flags

    add_pass_through_flags(parser.add_argument_group("torchrun"))
    refused = parser.add_argument_group(
        "Refused by this version (accepted by the reference launcher; each stops with the reason)"
    )
    hint = "Refused: see the message for the reason and the way to do it."
    for name in ("enable_cpu_affinity", "fp8_use_autocast_during_eval"):
        refused.add_argument(f"--{name}", action="store_true", default=None, help=hint)
    for name in ("deepspeed_moe_layer_cls_names", "fsdp_activation_checkpointing_offload"):
        refused.add_argument(f"--{name}", default=None, help=hint)
    for name, kind in _FP8.items():
        refused.add_argument(f"--fp8_{name}", default=None, help=hint, **_typed(kind))
    aws = parser.add_argument_group(
        "Amazon SageMaker (with a config file of compute_environment: AMAZON_SAGEMAKER)"
    )
    aws.add_argument("--aws_access_key_id", default=None, help="AWS key id submitting the job.")
    aws.add_argument("--aws_secret_access_key", default=None, help="Secret of that key id.")


def refused_flags() -> list[str]:
    """Every flag name (dest) that `check_refused` stops."""
    names = ["enable_cpu_affinity", "fp8_use_autocast_during_eval"]
    names += ["deepspeed_moe_layer_cls_names", "fsdp_activation_checkpointing_offload"]
    names += [f"fp8_{n}" for n in _FP8]
    return [*names, "aws_access_key_id", "aws_secret_access_key"]


def check_refused(args: argparse.Namespace) -> None:
    """Raise [`ConfigError`][accel_launch.ConfigError] for the first refused flag given on the command line.

    A flag that is given but false (``--fsdp_activation_checkpointing_offload false``) asks for
    nothing and passes.
    """
    for name in refused_flags():
        value = getattr(args, name, None)
        if value is None or value is False:
            continue
        if isinstance(value, str) and value.strip().lower() in ("false", "0", "no", "off"):
            continue
        # A value with a line break or another control character is shown quoted, on one line.
        shown = "" if value is True else f" {_shown(value)}"
        raise ConfigError(
            f"--{name} is not supported by accel launch: {REFUSED[_family(name)]} "
            f"Got --{name}{shown}."
        )
