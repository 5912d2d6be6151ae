"""Flags of ``accelerate launch`` beyond accel's own: torchrun pass-through options, refused
features, and the dash spelling of every flag.

A command line written for the reference launcher runs as ``accel launch`` after the word is
replaced: each of its flags is either honoured (passed to torchrun) or refused with a message
that names the flag, says why, and gives the way to get the same result.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from .configs._config_file import ConfigError

TORCHRUN_OPTIONS: dict[str, str] = {
    "tee": "Copy each process's stdout/stderr to a log file as well as the console "
    "(torchrun --tee: 0 none, 1 stdout, 2 stderr, 3 both; or per rank, e.g. 0:3,1:1). Needs "
    "--log_dir.",
    "log_dir": "Folder where torchrun writes each process's log files (torchrun --log_dir).",
    "role": "Role of the workers of this run (torchrun --role).",
    "rdzv_conf": "More rendezvous settings, key=value pairs separated by commas "
    "(torchrun --rdzv_conf, e.g. timeout=900).",
}
"""Flags given to torchrun as they are, with their help text."""

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


_TEE = re.compile(r"[0-3]|[0-9]+:[0-3](,[0-9]+:[0-3])*")
"""What torchrun's ``--tee`` accepts: one stream code, or ``rank:code`` pairs."""


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
    from ._flags import integer

    return {"type": integer if kind is int else str}


def add_compat_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the torchrun pass-through flags and the refused flags of the reference launcher."""
    run = parser.add_argument_group("torchrun")
    for name, help_text in TORCHRUN_OPTIONS.items():
        names = ["-t", f"--{name}"] if name == "tee" else [f"--{name}"]
        run.add_argument(*names, default=None, help=help_text)
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


def torchrun_options(args: argparse.Namespace) -> dict[str, str]:
    """The pass-through torchrun options given on the command line, by name."""
    return {
        name: str(getattr(args, name))
        for name in TORCHRUN_OPTIONS
        if getattr(args, name, None) is not None
    }


def add_torchrun_options(launcher: str, argv: list[str], args: argparse.Namespace) -> None:
    """Insert the pass-through options into torchrun's ``argv`` (in place).

    A given ``--rdzv_conf`` is joined to the one the launcher writes itself. Raises
    [`ConfigError`][accel_launch.ConfigError] when such an option is given but the run does not use torchrun, or
    ``--tee`` is given without ``--log_dir`` (torchrun has nowhere to write the copy).
    """
    options = torchrun_options(args)
    if not options:
        return
    if launcher != "torchrun":
        given = ", ".join(f"--{name}" for name in options)
        raise ConfigError(
            f"{given} are options of torchrun, but this run starts its processes with "
            f"{launcher}; got {given}. Drop them, or run through torchrun (several processes "
            "without --mpirun_hostfile or DeepSpeed's multi-machine launcher)."
        )
    if "tee" in options:
        tee = options["tee"]
        if not _TEE.fullmatch(tee):
            raise ConfigError(
                "--tee takes 0 (none), 1 (stdout), 2 (stderr) or 3 (both), or one of them per "
                f"rank as rank:stream pairs; got --tee {_shown(tee)}. Write e.g. --tee 3 or "
                "--tee 0:3,1:1."
            )
        if tee != "0" and "log_dir" not in options:
            raise ConfigError(
                "--tee copies the output of the processes to log files, so it needs a folder; "
                f"got --tee {tee} without --log_dir. Add --log_dir logs/."
            )
    extra: list[str] = []
    for name, value in options.items():
        if name == "rdzv_conf":
            mine = next((i for i, a in enumerate(argv) if a.startswith("--rdzv_conf=")), None)
            if mine is not None:
                argv[mine] = f"{argv[mine]},{value}"
                continue
        extra.append(f"--{name}={value}")
    argv[0:0] = extra
