"""Beyond one machine: SLURM detection, and the ``mpirun`` and ``deepspeed`` command lines."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from accel_state import environment_variables as contract

from .._errors import ConfigError


def job_port(job_id: str) -> int:
    """``20000 + job id % 10000``: the same on every machine of a job, different for two jobs."""
    digits = re.sub(r"\D", "", job_id) or "0"
    return 20000 + int(digits) % 10000


@dataclass(frozen=True)
class SlurmStep:
    """What ``srun`` tells a task about the job step it belongs to."""

    job_id: str
    """``SLURM_JOB_ID``."""
    num_nodes: int
    """Machines in the step (``SLURM_STEP_NUM_NODES``, else ``SLURM_NNODES``)."""
    node_id: int
    """Index of this machine in the step (``SLURM_NODEID``)."""
    num_tasks: int
    """Tasks srun started over all machines (``SLURM_STEP_NUM_TASKS``, else
    ``SLURM_NTASKS``)."""
    proc_id: int
    """Global index of this task (``SLURM_PROCID``)."""
    hosts: tuple[str, ...]
    """The step's machines, expanded from ``SLURM_STEP_NODELIST`` / ``SLURM_JOB_NODELIST``."""
    gpus_on_node: int | None
    """``SLURM_GPUS_ON_NODE`` when SLURM allocated GPUs."""

    @property
    def one_task_per_rank(self) -> bool:
        """srun started more tasks than machines: every task is one rank of the job."""
        return self.num_tasks > self.num_nodes

    @property
    def port(self) -> int:
        """A rendezvous port derived from the job id, the same on every machine of the job and
        different for two jobs sharing a machine."""
        return job_port(self.job_id)


def _int(env: Mapping[str, str], *keys: str) -> int | None:
    for key in keys:
        match = re.match(r"\d+", env.get(key, ""))
        if match:
            return int(match.group())
    return None


def detect_slurm(env: Mapping[str, str] | None = None) -> SlurmStep | None:
    """Return the SLURM step this process runs in when it was started by ``srun``.

    A batch script (``sbatch``) also sees ``SLURM_*`` variables but is not a step: there is no
    ``SLURM_STEP_ID``, and it runs on the first machine only, so nothing is detected there.
    ``ACCEL_IGNORE_SLURM=1`` turns detection off.
    """
    env = os.environ if env is None else env
    if contract.read_env(contract.ACCEL_IGNORE_SLURM, False, env):
        return None
    if "SLURM_STEP_ID" not in env and "SLURM_STEPID" not in env:
        return None
    if "SLURM_PROCID" not in env:
        return None
    num_nodes = _int(env, "SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES") or 1
    nodelist = (
        env.get("SLURM_STEP_NODELIST")
        or env.get("SLURM_JOB_NODELIST")
        or env.get("SLURM_NODELIST")
        or ""
    )
    hosts = tuple(expand_nodelist(nodelist)) if nodelist else ()
    if num_nodes > 1 and not hosts:
        raise ConfigError(
            f"srun reports {num_nodes} machines but no node list (SLURM_STEP_NODELIST and "
            "SLURM_JOB_NODELIST are empty), so the main machine is unknown. Pass "
            "--main_process_ip <first host of the job>."
        )
    return SlurmStep(
        job_id=env.get("SLURM_JOB_ID", env.get("SLURM_JOBID", "0")),
        num_nodes=num_nodes,
        node_id=_int(env, "SLURM_NODEID") or 0,
        num_tasks=_int(env, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS") or 1,
        proc_id=_int(env, "SLURM_PROCID") or 0,
        hosts=hosts,
        gpus_on_node=_int(env, "SLURM_GPUS_ON_NODE"),
    )


@dataclass(frozen=True)
class SlurmBatch:
    """What an ``sbatch`` script (a job with no step yet) knows about its allocation."""

    job_id: str
    """``SLURM_JOB_ID``."""
    num_nodes: int
    """Machines of the job (``SLURM_JOB_NUM_NODES``)."""
    num_tasks: int | None
    """Tasks the job asked for (``SLURM_NTASKS``, set by ``--ntasks``/``-n``)."""
    gpus_on_node: int | None
    """``SLURM_GPUS_ON_NODE`` when SLURM allocated GPUs."""

    @property
    def port(self) -> int:
        """The rendezvous port of the job (see `SlurmStep.port`)."""
        return job_port(self.job_id)


def detect_slurm_batch(env: Mapping[str, str] | None = None) -> SlurmBatch | None:
    """Return the allocation when this process is a batch script (``SLURM_JOB_ID`` and no
    ``SLURM_STEP_ID``); None elsewhere, or when ``ACCEL_IGNORE_SLURM=1``."""
    env = os.environ if env is None else env
    if contract.read_env(contract.ACCEL_IGNORE_SLURM, False, env):
        return None
    job_id = env.get("SLURM_JOB_ID", env.get("SLURM_JOBID"))
    if job_id is None or "SLURM_STEP_ID" in env or "SLURM_STEPID" in env:
        return None
    return SlurmBatch(
        job_id=job_id,
        num_nodes=_int(env, "SLURM_JOB_NUM_NODES", "SLURM_NNODES") or 1,
        num_tasks=_int(env, "SLURM_NTASKS", "SLURM_NPROCS"),
        gpus_on_node=_int(env, "SLURM_GPUS_ON_NODE"),
    )


def expand_nodelist(text: str) -> list[str]:
    """Expand a SLURM host list: ``"gpu[01-03,07],login1"`` -> ``gpu01, gpu02, gpu03, gpu07,
    login1`` (zero padding kept; several bracket groups per name are expanded too).

    Raises:
        ConfigError: for a list with unbalanced brackets.
    """
    hosts: list[str] = []
    for item in _split_top_level(text.strip()):
        hosts.extend(_expand_one(item))
    return hosts


def _split_top_level(text: str) -> list[str]:
    items, depth, current = [], 0, ""
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                break
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    if depth != 0:
        raise ConfigError(
            f"a SLURM node list has balanced brackets, like 'node[1-4]'; got {text!r}. Check "
            "SLURM_JOB_NODELIST."
        )
    if current:
        items.append(current)
    return [item for item in items if item]


def _expand_one(item: str) -> list[str]:
    match = re.match(r"([^\[]*)\[([^\]]*)\](.*)", item)
    if match is None:
        return [item]
    prefix, ranges, rest = match.groups()
    out = []
    for part in ranges.split(","):
        if "-" in part:
            low, high = part.split("-", 1)
            width = len(low)
            numbers = [str(n).zfill(width) for n in range(int(low), int(high) + 1)]
        else:
            numbers = [part]
        for number in numbers:
            out.extend(_expand_one(prefix + number + rest))
    return out


def read_hostfile(path: str | os.PathLike[str]) -> list[tuple[str, int | None]]:
    """Read an MPI / DeepSpeed hostfile: one ``host [slots=N]`` per line, ``#`` comments.

    Raises:
        ConfigError: when the file is missing or a line is not ``host [slots=N]``.
    """
    target = Path(path)
    if not target.is_file():
        raise ConfigError(
            f"hostfile {str(target)!r} does not exist. Write one line per machine, e.g. "
            "`node1 slots=2`."
        )
    hosts: list[tuple[str, int | None]] = []
    for number, line in enumerate(target.read_text().splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        match = re.fullmatch(r"(\S+)(?:\s+(?:slots|max_slots)\s*=\s*(\d+))?", text)
        if match is None:
            raise ConfigError(
                f"hostfile {str(target)!r} line {number}: each line is `host` or `host "
                f"slots=N`; got {line!r}."
            )
        hosts.append((match.group(1), int(match.group(2)) if match.group(2) else None))
    if not hosts:
        raise ConfigError(f"hostfile {str(target)!r} lists no host. Add `host slots=N` lines.")
    return hosts


def mpi_flavour(mpirun: str = "mpirun") -> str:
    """``openmpi`` or ``mpich`` (MPICH, Intel MPI, MVAPICH: the Hydra launcher), from
    ``mpirun --version``; ``openmpi`` when the question cannot be answered."""
    try:
        text = subprocess.run(
            [mpirun, "--version"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "openmpi"
    return "openmpi" if "Open MPI" in text or "OpenRTE" in text else "mpich"


def python_target(target: list[str], module: bool, no_python: bool) -> list[str]:
    """The command that runs the user's target in one process."""
    if no_python:
        return list(target)
    return [sys.executable, *(["-m"] if module else []), *target]


def mpirun_command(
    hostfile: str,
    num_processes: int,
    num_machines: int,
    env: Mapping[str, str],
    target: list[str],
    flavour: str = "openmpi",
    mpirun: str = "mpirun",
) -> list[str]:
    """The ``mpirun`` command line that starts ``num_processes`` ranks on the hostfile's hosts.

    Args:
        hostfile: The hostfile (``host slots=N`` lines).
        num_processes: Total processes over all machines.
        num_machines: Machines used; the processes are spread evenly when above 1.
        env: Variables every rank must receive (passed by name to Open MPI, by value to
            Hydra-based MPIs, since remote ranks do not inherit the local environment).
        target: The command each rank runs (see `python_target`).
        flavour: ``openmpi`` or ``mpich``.
        mpirun: The launcher executable.
    """
    per_node = num_processes // num_machines
    if flavour == "openmpi":
        command = [mpirun, "--hostfile", hostfile, "-np", str(num_processes)]
        if num_machines > 1:
            command += ["--npernode", str(per_node)]
        for name in sorted(env):
            command += ["-x", name]
    else:
        command = [mpirun, "-f", hostfile, "-n", str(num_processes)]
        if num_machines > 1:
            command += ["-ppn", str(per_node)]
        for name in sorted(env):
            command += ["-genv", name, env[name]]
    return command + target


CHILD_MODULE = "accel_launch._child"


def encode_environment(env: Mapping[str, str]) -> str:
    """Pack variables into one command-line word for `accel_launch._child`."""
    return base64.urlsafe_b64encode(json.dumps(dict(env), sort_keys=True).encode()).decode()


def deepspeed_command(
    *,
    hostfile: str | None,
    num_machines: int,
    processes_per_machine: int,
    main_process_ip: str | None,
    main_process_port: int,
    launcher: str,
    inclusion_filter: str | None,
    exclusion_filter: str | None,
    env: Mapping[str, str],
    target: list[str],
    module: bool,
    no_python: bool,
    deepspeed: str = "deepspeed",
) -> list[str]:
    """The command line of DeepSpeed's multi-machine launcher.

    DeepSpeed forwards only some variables to remote machines, so the configuration travels
    on the command line: every rank runs ``python -m accel_launch._child <packed env> ...``,
    which sets the variables and then runs the user's target.
    """
    command = [deepspeed]
    if hostfile:
        command += ["--hostfile", hostfile]
    if inclusion_filter or exclusion_filter:
        # DeepSpeed refuses --num_nodes/--num_gpus together with a filter.
        if inclusion_filter:
            command += ["--include", inclusion_filter]
        if exclusion_filter:
            command += ["--exclude", exclusion_filter]
    else:
        command += ["--num_nodes", str(num_machines), "--num_gpus", str(processes_per_machine)]
    if main_process_ip:
        command += ["--master_addr", main_process_ip]
    command += ["--master_port", str(main_process_port), "--launcher", launcher]
    command += ["--no_local_rank", "--module", CHILD_MODULE, encode_environment(env)]
    if module:
        command.append("--module")
    if no_python:
        command.append("--no_python")
    return command + list(target)


def find_executable(name: str, install_hint: str) -> str:
    """Path of executable ``name``.

    Raises:
        ConfigError: naming the install command when it is not on ``PATH``.
    """
    found = shutil.which(name)
    if found is None:
        raise ConfigError(
            f"this launch needs the `{name}` command, which is not on PATH. {install_hint}"
        )
    return found
