"""Reading the launcher's environment: flags, and which process of which world this is."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

_TRUE = {"1", "true", "yes", "y", "on"}
_FALSE = {"0", "false", "no", "n", "off", ""}


def str_to_bool(value: str, to_bool: bool = False) -> int | bool:
    """Parse a boolean written as text (``1/0``, ``true/false``, ``yes/no``, ``on/off``).

    Args:
        value: The text.
        to_bool: Return ``True``/``False`` instead of ``1``/``0``.

    Raises:
        ValueError: if the text is none of those.
    """
    text = value.strip().lower()
    if text in _TRUE:
        return True if to_bool else 1
    if text in _FALSE:
        return False if to_bool else 0
    raise ValueError(
        f"a boolean setting must be one of {sorted(_TRUE | _FALSE - {''})}; got {value!r}. "
        "Use 1 or 0."
    )


def parse_flag_from_env(key: str, default: bool = False) -> bool:
    """Return the boolean value of environment variable ``key`` (``default`` when unset)."""
    value = os.environ.get(key)
    if value is None:
        return default
    try:
        return bool(str_to_bool(value, to_bool=True))
    except ValueError as err:
        raise ValueError(f"environment variable {key}: {err}") from None


def parse_choice_from_env(key: str, default: str = "no") -> str:
    """Return the lower-cased text of environment variable ``key`` (``default`` when unset)."""
    return os.environ.get(key, default).strip().lower()


def get_int_from_env(env_keys: list[str], default: int) -> int:
    """Return the first of ``env_keys`` that is set in the environment, as an int."""
    for key in env_keys:
        value = os.environ.get(key)
        if value not in (None, ""):
            try:
                return int(value)
            except ValueError:
                raise ValueError(
                    f"environment variable {key} must be an integer; got {value!r}."
                ) from None
    return default


@contextlib.contextmanager
def patch_environment(**kwargs: object) -> Iterator[None]:
    """Set environment variables for the duration of a ``with`` block.

    Keys are upper-cased and values turned into strings. On exit each variable gets back the
    value it had before (or is removed if it did not exist).
    """
    saved: dict[str, str | None] = {}
    for key, value in kwargs.items():
        name = key.upper()
        saved[name] = os.environ.get(name)
        os.environ[name] = str(value)
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old


@contextlib.contextmanager
def clear_environment() -> Iterator[None]:
    """Empty ``os.environ`` for the duration of a ``with`` block, then restore it exactly."""
    saved = dict(os.environ)
    os.environ.clear()
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@dataclass(frozen=True)
class WorldInfo:
    """Where this process sits in the job, as the launcher described it."""

    rank: int
    """Global index of this process."""
    world_size: int
    """Total number of processes over all machines."""
    local_rank: int
    """Index of this process on its machine."""
    local_world_size: int
    """Number of processes on this machine."""
    master_addr: str | None
    """Address of the rank-0 machine, when known."""
    master_port: str | None
    """Port of the rendezvous on the rank-0 machine, when known."""
    launcher: str
    """Which launcher set the variables: ``torchrun``, ``mpi``, ``slurm`` or ``none``."""


def _first_slurm_host(nodelist: str) -> str:
    """Return the first host of a SLURM node list such as ``node[01-04,07],gpu1``."""
    head = re.match(r"([^,\[]+)(\[([^\]]+)\])?", nodelist.strip())
    if head is None:
        return nodelist
    prefix, bracket = head.group(1), head.group(3)
    if not bracket:
        return prefix
    first = bracket.split(",")[0].split("-")[0]
    return prefix + first


def _leading_int(text: str | None, default: int) -> int:
    """Read ``2`` out of SLURM's ``2(x3)`` notation."""
    match = re.match(r"\d+", text or "")
    return int(match.group()) if match else default


def detect_world() -> WorldInfo:
    """Detect rank and world size from torchrun, MPI or SLURM environment variables.

    torchrun's variables (``RANK``/``WORLD_SIZE``) win; then Open MPI / MPICH / MVAPICH; then
    SLURM, for a task of an ``srun`` step only (an ``sbatch`` script is one process). With none
    of them this is a single process.
    """
    env = os.environ
    if "RANK" in env and "WORLD_SIZE" in env:
        return WorldInfo(
            rank=get_int_from_env(["RANK"], 0),
            world_size=get_int_from_env(["WORLD_SIZE"], 1),
            local_rank=get_int_from_env(["LOCAL_RANK"], 0),
            local_world_size=get_int_from_env(["LOCAL_WORLD_SIZE"], 1),
            master_addr=env.get("MASTER_ADDR"),
            master_port=env.get("MASTER_PORT"),
            launcher="torchrun",
        )
    mpi_world = get_int_from_env(["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"], 0)
    if mpi_world > 0:
        return WorldInfo(
            rank=get_int_from_env(["OMPI_COMM_WORLD_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK"], 0),
            world_size=mpi_world,
            local_rank=get_int_from_env(
                ["OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK"], 0
            ),
            local_world_size=get_int_from_env(
                ["OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_LOCAL_SIZE"], 1
            ),
            master_addr=env.get("MASTER_ADDR", "127.0.0.1"),
            master_port=env.get("MASTER_PORT", "29500"),
            launcher="mpi",
        )
    # A batch script (sbatch) also sees SLURM_NTASKS and SLURM_PROCID=0 but is one process, not
    # a task of an srun step: only a step (SLURM_STEP_ID) makes every task a rank.
    slurm_world = get_int_from_env(["SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"], 0)
    in_step = "SLURM_STEP_ID" in env or "SLURM_STEPID" in env
    if slurm_world > 0 and in_step and "SLURM_PROCID" in env:
        nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or "127.0.0.1"
        per_node = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_NTASKS_PER_NODE")
        return WorldInfo(
            rank=get_int_from_env(["SLURM_PROCID"], 0),
            world_size=slurm_world,
            local_rank=get_int_from_env(["SLURM_LOCALID"], 0),
            local_world_size=_leading_int(per_node, slurm_world),
            master_addr=env.get("MASTER_ADDR", _first_slurm_host(nodelist)),
            master_port=env.get("MASTER_PORT", "29500"),
            launcher="slurm",
        )
    return WorldInfo(0, 1, 0, 1, None, None, "none")
