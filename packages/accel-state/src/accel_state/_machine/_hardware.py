"""Hardware facts a launcher checks before starting processes: CPU ranks from the launcher's
environment, NUMA placement, the accelerator type, NVIDIA GPUs through ``nvidia-smi``.

Nothing here initialises a device, so it is safe before forking worker processes.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

from .._env._launcher import get_int_from_env

logger = logging.getLogger("accel_state.machine")

NUMA_NODES_DIR = "/sys/devices/system/node"
"""Where Linux describes NUMA nodes (``node<i>/cpulist``)."""


@dataclass
class CPUInformation:
    """Ranks of this process as the launcher (torchrun, Intel MPI, Open MPI, MVAPICH) set them."""

    rank: int = 0
    """The rank of this process among all processes."""
    world_size: int = 1
    """The number of processes."""
    local_rank: int = 0
    """The rank of this process on its machine."""
    local_world_size: int = 1
    """The number of processes on this machine."""


def get_cpu_distributed_information() -> CPUInformation:
    """Read [`CPUInformation`][accel_state.CPUInformation] from the variables of torchrun, Intel MPI, Open MPI and
    MVAPICH (the first one set wins; defaults describe a single process)."""
    return CPUInformation(
        rank=get_int_from_env(
            ["RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK"], 0
        ),
        world_size=get_int_from_env(
            ["WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE"], 1
        ),
        local_rank=get_int_from_env(
            [
                "LOCAL_RANK",
                "MPI_LOCALRANKID",
                "OMPI_COMM_WORLD_LOCAL_RANK",
                "MV2_COMM_WORLD_LOCAL_RANK",
            ],
            0,
        ),
        local_world_size=get_int_from_env(
            [
                "LOCAL_WORLD_SIZE",
                "MPI_LOCALNRANKS",
                "OMPI_COMM_WORLD_LOCAL_SIZE",
                "MV2_COMM_WORLD_LOCAL_SIZE",
            ],
            1,
        ),
    )


def parse_cpu_list(text: str) -> list[int]:
    """``"0-3,8,10-11"`` (Linux's cpulist format) -> ``[0, 1, 2, 3, 8, 10, 11]``."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        first, _, last = part.partition("-")
        cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


def numa_nodes(root: str = NUMA_NODES_DIR) -> list[list[int]]:
    """The CPUs of each NUMA node with CPUs, by node number (empty when ``root`` is absent)."""
    if not os.path.isdir(root):
        return []
    nodes = []
    numbered = [n for n in os.listdir(root) if n.startswith("node") and n[4:].isdecimal()]
    for name in sorted(numbered, key=lambda n: int(n[4:])):
        path = os.path.join(root, name, "cpulist")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                cpus = parse_cpu_list(f.read())
            if cpus:
                nodes.append(cpus)
    return nodes


def override_numa_affinity(local_process_index: int, verbose: bool | None = None) -> None:
    """Pin this process to the CPUs of one NUMA node: node ``local_process_index % nodes``.

    Processes of one machine are spread over its NUMA nodes round-robin, so each computes on
    memory local to its CPUs. Only CPUs this process may already use are kept; when the node
    has none of them the affinity is left as it is (with a log line).

    Args:
        local_process_index: The index of this process on its machine.
        verbose: Log the CPUs chosen (default: on in debug mode, ``ACCEL_DEBUG_MODE=1``).

    Raises:
        ValueError: ``local_process_index`` is negative.
        OSError: the platform cannot set CPU affinity (not Linux).
    """
    if local_process_index < 0:
        raise ValueError(
            f"local_process_index is the index of the process on its machine, >= 0; got "
            f"{local_process_index}. Pass PartialState().local_process_index."
        )
    if not hasattr(os, "sched_setaffinity"):
        raise OSError(
            f"setting CPU affinity needs Linux's sched_setaffinity; this platform "
            f"({sys.platform}) has none. Do not call set_numa_affinity here."
        )
    if verbose is None:
        from .._process._partial_state import is_debug_mode

        verbose = is_debug_mode()
    nodes = numa_nodes()
    allowed = os.sched_getaffinity(0)
    if not nodes:
        logger.info(
            "No NUMA node is described under %s; CPU affinity left as it is.", NUMA_NODES_DIR
        )
        return
    node = local_process_index % len(nodes)
    cpus = sorted(set(nodes[node]) & allowed)
    if not cpus:
        logger.info(
            "NUMA node %d has none of the CPUs this process may use (%s); affinity left as it is.",
            node,
            sorted(allowed),
        )
        return
    os.sched_setaffinity(0, cpus)
    if verbose:
        logger.info("Process %d pinned to NUMA node %d, CPUs %s.", local_process_index, node, cpus)


@functools.lru_cache
def set_numa_affinity(local_process_index: int, verbose: bool | None = None) -> None:
    """[`override_numa_affinity`][accel_state.override_numa_affinity], once per process (later calls with the same arguments
    do nothing; call ``override_numa_affinity`` to pin again)."""
    override_numa_affinity(local_process_index=local_process_index, verbose=verbose)


def are_libraries_initialized(*library_names: str) -> list[str]:
    """The names of ``library_names`` that are already imported in this process."""
    return [name for name in library_names if name in sys.modules]


def _nvidia_smi(*query: str) -> list[str]:
    executable = shutil.which("nvidia-smi")
    if executable is None:
        raise FileNotFoundError(
            "reading GPU facts without initialising CUDA needs nvidia-smi; it is not on PATH. "
            "Install the NVIDIA driver (which ships nvidia-smi) or add its folder to PATH."
        )
    output = subprocess.run(
        [executable, *query, "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return [line.strip() for line in output.strip().splitlines() if line.strip()]


def get_gpu_info() -> tuple[list[str], int]:
    """``(names, count)`` of this machine's NVIDIA GPUs, read with ``nvidia-smi``.

    Raises:
        FileNotFoundError: ``nvidia-smi`` is not on PATH.
        subprocess.CalledProcessError: ``nvidia-smi`` failed (no driver loaded).
    """
    lines = _nvidia_smi("--query-gpu=name")
    return lines, len(lines)


def get_driver_version() -> str:
    """The NVIDIA driver version (of the first GPU), read with ``nvidia-smi``.

    Raises:
        FileNotFoundError: ``nvidia-smi`` is not on PATH.
    """
    return _nvidia_smi("--query-gpu=driver_version")[0]


_P2P_BROKEN_CONSUMER_GPUS = ("RTX 40",)
_P2P_FIXED_DRIVER = (550, 40, 7)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.strip().split(".") if part.isdecimal())


def check_cuda_p2p_ib_support() -> bool:
    """False when several consumer GPUs known to break peer-to-peer and InfiniBand transfers
    (RTX 40 series) run a driver older than 550.40.07; True otherwise.

    True also when the GPUs cannot be read (no ``nvidia-smi``: no NVIDIA GPU to worry about).
    """
    try:
        names, count = get_gpu_info()
        if count < 2 or not any(bad in name for name in names for bad in _P2P_BROKEN_CONSUMER_GPUS):
            return True
        return _version(get_driver_version()) >= _P2P_FIXED_DRIVER
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        return True
