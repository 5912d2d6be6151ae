"""The launcher backends of ``accel launch``, in the order they are asked whether they apply.

Adding a backend: write its module beside the others and add one line to ``_REGISTRY``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .._errors import ConfigError
from ..configs._config_file import FIELD_NAMES
from ._config_field import ConfigField, check_fields
from ._deepspeed_multinode import DeepSpeedLauncher
from ._launcher_base import Launcher
from ._mpi import MpirunLauncher
from ._python import PythonLauncher
from ._slurm import SlurmTaskLauncher
from ._torchrun import TorchrunLauncher

if TYPE_CHECKING:
    from .._resolve import LaunchPlan

_REGISTRY: list[Launcher] = [
    SlurmTaskLauncher(),  # srun started every rank: run the target directly
    MpirunLauncher(),  # an mpirun_hostfile
    DeepSpeedLauncher(),  # DeepSpeed over several machines, launcher other than `standard`
    PythonLauncher(),  # one process
    TorchrunLauncher(),  # everything else
]


def registered() -> tuple[Launcher, ...]:
    """The backends, first asked first."""
    return tuple(_REGISTRY)


def launcher_fields() -> dict[str, ConfigField]:
    """The config-file settings declared by the registered backends, by name."""
    return {declared.name: declared for known in _REGISTRY for declared in known.config_fields}


def register_launcher(launcher: Launcher, before: str | None = None) -> None:
    """Make ``accel launch`` (in this process) ask ``launcher`` whether it applies.

    Args:
        launcher: An instance of a [`Launcher`][accel_launch.Launcher] subclass.
        before: The name of the backend it is asked before (``"torchrun"``); None: before
            every other one.

    Raises:
        ValueError: ``launcher`` is no ``Launcher``, has no name, its name is taken,
            ``before`` names no registered backend, or a setting of its ``config_fields`` is
            no ``ConfigField`` or has the name of a setting already known.
    """
    if not isinstance(launcher, Launcher) or not launcher.name:
        raise ValueError(
            "register_launcher takes an instance of a Launcher subclass with a `name`; got "
            f"{launcher!r}. Subclass accel_launch.Launcher and set name = '...'."
        )
    names = [known.name for known in _REGISTRY]
    if launcher.name in names:
        raise ValueError(
            f"a launcher named {launcher.name!r} is already registered (registered: {names}). "
            "Give the new one another name."
        )
    if before is not None and before not in names:
        raise ValueError(
            f"register_launcher(before=...) names a registered launcher; got {before!r}, "
            f"registered: {names}."
        )
    check_fields(launcher.name, launcher.config_fields)
    taken = set(FIELD_NAMES) | set(launcher_fields())
    for declared in launcher.config_fields:
        if declared.name in taken:
            raise ValueError(
                f"launcher {launcher.name!r} declares the setting {declared.name!r}, which the "
                "config file already has. Give the setting a name of its own (e.g. "
                f"{launcher.name.replace('-', '_')}_{declared.name})."
            )
    _REGISTRY.insert(0 if before is None else names.index(before), launcher)


def choose(plan: LaunchPlan, args: argparse.Namespace | None = None) -> Launcher:
    """The first registered backend that applies to ``plan`` and the parsed flags ``args``."""
    flags = argparse.Namespace() if args is None else args
    for launcher in _REGISTRY:
        if launcher.applies(plan, flags):
            return launcher
    raise ConfigError(
        "no launcher applies to this launch; the registered ones are "
        f"{[known.name for known in _REGISTRY]}. Register one whose `applies` accepts it."
    )
