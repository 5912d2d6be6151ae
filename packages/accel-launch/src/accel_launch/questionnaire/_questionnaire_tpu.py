"""``accel config``: the TPU / XLA section of the questionnaire and the config it produces."""

from __future__ import annotations

import os
from collections.abc import Callable

from .._errors import ConfigError
from ..configs._config_file import LaunchConfig
from ..configs._tpu_settings import XLA_PRECISIONS, check_pod, env_pairs
from ._prompts import Prompter, whole
from ._questionnaire import _existing_file, _positive


def _problem(check: Callable[[], object]) -> str | None:
    """The message of the ConfigError ``check`` raises (without its final fix), or None."""
    try:
        check()
    except ConfigError as err:
        return str(err).rstrip(".")
    return None


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _identifier(name: str) -> str | None:
    return None if name.isidentifier() else f"a function name is a Python identifier, got {name!r}"


def ask_tpu(ask: Prompter) -> LaunchConfig:
    """Ask what an XLA run on TPUs needs: the function each process runs, the pod (name, zone,
    sudo, workers, commands for ``accel tpu-config``), variables, processes and bf16.

    Args:
        ask: Where questions go and answers come from.

    Returns:
        The checked config, with ``distributed_type`` XLA.
    """
    config = LaunchConfig(distributed_type="XLA")
    config.main_training_function = ask.ask(
        "Which function of your script should each process run?", "main", check=_identifier
    )
    config.tpu_use_cluster = ask.yes_no(
        "Are you using a TPU pod (several VMs, launched through gcloud)?", False
    )
    if config.tpu_use_cluster:
        _ask_pod(ask, config)
    env = ask.ask(
        "Variables set for the processes, KEY=VALUE, comma-separated?",
        "",
        check=lambda e: _problem(lambda: env_pairs(_items(e))),
    )
    config.tpu_env = _items(env) or None
    config.num_processes = ask.ask(
        "How many TPU cores should be used (1: a single process; more: one process per core "
        "of each VM)?",
        1,
        whole,
        _positive,
    )
    config.mixed_precision = XLA_PRECISIONS[
        ask.choose("Do you wish to use mixed precision?", XLA_PRECISIONS)
    ]
    if config.mixed_precision == "bf16":
        config.downcast_bf16 = ask.yes_no(
            "Cast float32 to bf16 and float64 to float32 only (XLA_DOWNCAST_BF16), instead of "
            "every float to bf16?",
            False,
        )
    return config.validate()


def _ask_pod(ask: Prompter, config: LaunchConfig) -> None:
    config.tpu_name = ask.ask(
        "What is the name of your TPU pod?",
        None,
        check=lambda n: _problem(lambda: check_pod(n, None)),
    )
    config.tpu_zone = ask.ask(
        "What is its zone (e.g. us-central2-b)?",
        None,
        check=lambda z: _problem(lambda: check_pod(None, z)),
    )
    config.tpu_use_sudo = ask.yes_no("Should accel launch run with sudo on each VM?", False)
    if ask.yes_no("Do you want `accel tpu-config` to run setup commands on each VM?", False):
        if ask.yes_no("Are the commands in a file (one command per line)?", False):
            path = ask.ask("Path of that file?", None, check=_existing_file)
            config.command_file = os.path.abspath(path)
        else:
            commands: list[str] = [ask.ask("A command to run on each VM?", None)]
            while ask.yes_no("Another command?", False):
                commands.append(ask.ask("A command to run on each VM?", None))
            config.commands = commands
    workers = ask.ask(
        "Which workers should be launched on (indices or VM names, comma-separated; all: every "
        "worker)?",
        "all",
        check=lambda w: _problem(lambda: _check_workers(w)),
    )
    config.tpu_vm = None if workers == "all" else _items(workers) or None


def _check_workers(text: str) -> None:
    if text == "all":
        return
    LaunchConfig(distributed_type="XLA", tpu_vm=_items(text)).validate()


__all__ = ["ask_tpu"]
