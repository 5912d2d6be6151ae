"""What a launcher backend of ``accel launch`` says about itself: when it applies, how many
processes and machines it starts, its command line and environment, its flags and config
fields, and how it reports a failed rank."""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from ._cluster import find_executable
from ._config_field import ConfigField
from ._processes import check_target, run_child

if TYPE_CHECKING:
    from .._resolve import LaunchPlan


def integer(text: str) -> int:
    """An ``int`` flag value (the ``type`` of a backend's whole-number flag)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number like 2, got {text!r}") from None


def finite(text: str) -> float:
    """A ``float`` flag value: a finite number (no nan, no inf)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number like 1.0, got {text!r}")
    return value


@dataclass
class LaunchCommand:
    """What ``accel launch`` runs on this machine."""

    launcher: str
    """The name of the backend that built it: ``python`` (one process), ``torchrun``,
    ``mpirun``, ``deepspeed``, ``slurm-task`` (srun started every rank; this task runs one), or
    the name of a registered backend."""
    argv: list[str]
    """The command line (for ``torchrun``: its arguments, run in this process)."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables added to the environment of the processes."""

    def display(self) -> str:
        """The command as a shell line."""
        head = ["torchrun"] if self.launcher == "torchrun" else []
        return shlex.join(head + self.argv)


@dataclass(frozen=True)
class LaunchTarget:
    """What the user asked to run in each process."""

    argv: list[str]
    """The script (module, or executable) and its arguments."""
    module: bool = False
    """Run ``argv[0]`` as a module (``python -m``)."""
    no_python: bool = False
    """Run ``argv[0]`` as an executable, without Python."""

    def python_command(self) -> list[str]:
        """The command that runs the target in one process: ``python [-m] script args``, or the
        executable and its arguments."""
        if self.no_python:
            return list(self.argv)
        return [sys.executable, *(["-m"] if self.module else []), *self.argv]


class Launcher:
    """A way to start the processes of a job. Subclass it, fill the class attributes, write
    [`applies`][accel_launch.Launcher.applies] and [`build`][accel_launch.Launcher.build],
    and register an instance with [`register_launcher`][accel_launch.register_launcher].
    """

    name: ClassVar[str] = ""
    """Shown in ``--explain`` and in the launcher's first line (``... via torchrun``)."""
    runs_target_here: ClassVar[bool] = True
    """The processes run on this machine: a missing script is refused before any starts."""
    executable: ClassVar[tuple[str, str] | None] = None
    """``(command, install hint)``: the command ``argv[0]`` names, looked up on ``PATH``."""
    binds_port: ClassVar[bool] = False
    """A process of this machine opens the rendezvous port: a given port must be free."""
    starts_ranks: ClassVar[bool] = False
    """``argv[0]`` is a launcher of its own (``mpirun``): Ctrl-C is passed on as SIGINT, it
    gets SIGTERM when ``accel launch`` dies, and a failure is reported by
    [`report_failure`][accel_launch.Launcher.report_failure]."""
    announces: ClassVar[bool] = True
    """``accel launch`` prints one line first (processes, machines, backend, precision)."""
    config_fields: ClassVar[tuple[ConfigField, ...]] = ()
    """The settings of the config file that this backend reads beyond the common ones
    (``num_processes``, ``num_machines``, ``main_process_ip`` ...), each declared here with
    its type, default, help and check."""

    def add_flags(self, group: argparse._ArgumentGroup) -> None:
        """Add the flags of this backend to ``accel launch`` (group ``Distributed``)."""

    def applies(self, plan: LaunchPlan, args: argparse.Namespace) -> bool:
        """Whether this backend starts the processes of ``plan`` (the first registered backend
        that applies does); ``args`` holds the parsed flags, this backend's among them (an
        empty namespace when the plan was built without flags)."""
        raise NotImplementedError(f"{type(self).__name__} must say when it applies")

    def layout(self, plan: LaunchPlan) -> tuple[int, int]:
        """``(processes, machines)`` that this backend starts, over the whole job."""
        return plan.config.num_processes, plan.config.num_machines

    def build(
        self, plan: LaunchPlan, target: LaunchTarget, port: int, env: dict[str, str]
    ) -> LaunchCommand:
        """The command line and environment; ``env`` holds the ``ACCEL_*`` variables of the
        plan (this method may add to it and return it as ``LaunchCommand.env``).

        Raises:
            ConfigError: the plan cannot run on this backend, with the rule, value and fix.
        """
        raise NotImplementedError(f"{type(self).__name__} must build its command")

    def prepare(self, command: LaunchCommand, target: LaunchTarget) -> None:
        """Check, before any process starts, that the target and the executable exist.

        Raises:
            ConfigError: naming what is missing and how to get it.
        """
        if self.runs_target_here:
            check_target(target.argv[0], target.module, target.no_python)
        if self.executable is not None:
            find_executable(*self.executable)

    def binds_port_here(self, plan: LaunchPlan) -> bool:
        """Whether the rendezvous port is opened by a process of this machine."""
        return self.binds_port and plan.config.machine_rank == 0

    def run(self, command: LaunchCommand, env: dict[str, str], quiet: bool) -> int:
        """Start the processes with ``env`` as their environment; return the exit code."""
        code = run_child(command.argv, env, forward_sigint=self.starts_ranks)
        if code != 0 and not quiet:
            self.report_failure(code)
        return code

    def report_failure(self, code: int) -> None:
        """Tell the user which rank failed, when ``run`` ended with a nonzero ``code``.

        A backend whose processes print their own tracebacks says nothing more by default; a
        launcher of its own (``starts_ranks``) points at its ranks' output.
        """
        if self.starts_ranks:
            print(
                f"accel launch: {self.name} exited with code {code}; the ranks' output above "
                "says which failed.",
                file=sys.stderr,
            )
