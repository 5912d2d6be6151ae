"""How many processes and machines a launch may ask for.

torch's elastic agent builds one structure per process of a machine and, on machine 0, one per
machine before any process starts, so a count no machine can run (``num_processes: 1000000000``
in a config file) would keep the launcher busy without end instead of failing. Both counts are
checked before anything starts:

- processes per machine (``num_processes / num_machines``): at most
  `PROCESSES_PER_UNIT` per CPU core this process may use or per local accelerator,
  whichever gives more; ``ACCEL_MAX_PROCESSES_PER_MACHINE`` sets another limit;
- machines: at most `MAX_MACHINES`; ``ACCEL_MAX_MACHINES`` sets another limit.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable

from accel_state import environment_variables as contract

from .._errors import ConfigError

PROCESSES_PER_UNIT = 8
"""Processes a machine may run per usable CPU core or per local accelerator."""
MAX_MACHINES = 65536
"""Machines one launch may span (the largest jobs run on a few thousand)."""


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity set (what a container or ``taskset`` grants),
    not every CPU of the machine."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # no affinity call on this platform
        return os.cpu_count() or 1


def local_accelerators() -> int:
    """CUDA (or ROCm) devices of this machine; torch is imported only where a driver exists."""
    if "torch" not in sys.modules and not any(
        (shutil.which("nvidia-smi"), shutil.which("rocm-smi"), os.path.exists("/dev/nvidiactl"))
    ):
        return 0
    import torch

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def _override(variable: str) -> int | None:
    try:
        value = contract.read_env(variable)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    return None if value is None else int(value)


def check_machines(num_machines: int, *, who: str, fix: str) -> None:
    """Refuse more machines than `MAX_MACHINES` (or ``ACCEL_MAX_MACHINES``).

    Args:
        num_machines: The machines asked for.
        who: What asks, for the message (``num_machines``, ``notebook_launcher: num_nodes``).
        fix: How to ask for fewer (``Pass --num_machines N``).

    Raises:
        ConfigError: naming the limit, the count, the fix and the variable that raises it.
    """
    limit = _override(contract.ACCEL_MAX_MACHINES) or MAX_MACHINES
    if num_machines <= limit:
        return
    raise ConfigError(
        f"{who} must be at most {limit} machines; got {num_machines}. {fix}, or set "
        f"{contract.ACCEL_MAX_MACHINES}={num_machines} if the run really spans that many."
    )


def check_processes_per_machine(per_machine: int, *, who: str, fix: Callable[[int], str]) -> None:
    """Refuse more processes per machine than this machine can run.

    The limit is `PROCESSES_PER_UNIT` per usable CPU core or per local accelerator,
    whichever gives more, or ``ACCEL_MAX_PROCESSES_PER_MACHINE`` when set. Torch is not
    imported for a count within the CPU limit.

    Args:
        per_machine: The processes to start on each machine.
        who: What asks, for the message (``num_processes=64 over num_machines=2``).
        fix: How to ask for fewer, given the largest count per machine allowed.

    Raises:
        ConfigError: naming the limit and how it is computed, the count, the fix and the
            variable that raises the limit.
    """
    chosen = _override(contract.ACCEL_MAX_PROCESSES_PER_MACHINE)
    cpus = usable_cpus()
    if chosen is None and per_machine <= PROCESSES_PER_UNIT * cpus:
        return
    if chosen is not None:
        limit = chosen
        rule = f"the limit set by {contract.ACCEL_MAX_PROCESSES_PER_MACHINE}"
    else:
        devices = local_accelerators()
        limit = PROCESSES_PER_UNIT * max(cpus, devices)
        rule = (
            f"{PROCESSES_PER_UNIT} per usable CPU core or local accelerator, whichever gives "
            f"more: {cpus} cores and {devices} accelerators here"
        )
    if per_machine <= limit:
        return
    raise ConfigError(
        f"{who}: this machine runs at most {limit} processes per machine ({rule}); got "
        f"{per_machine} per machine. {fix(limit)}, or set "
        f"{contract.ACCEL_MAX_PROCESSES_PER_MACHINE}={per_machine} to allow that many."
    )
