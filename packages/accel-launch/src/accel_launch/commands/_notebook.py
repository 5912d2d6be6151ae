"""``notebook_launcher``: start a training function on several processes from inside a running
Python session (a Jupyter kernel, an IPython shell, a script), on one machine or several.

The processes are forked by torch elastic's agent (``torch.distributed.launcher``), which gives
each the variables of the launcher-to-process contract (``RANK``, ``LOCAL_RANK``,
``WORLD_SIZE``, ``MASTER_ADDR`` ...) plus ``ACCEL_MIXED_PRECISION``, so ``PartialState()`` or
``Accelerator()`` inside the function joins the group. Forking keeps functions defined in the
notebook usable; it also means the parent must not have started a process group or a device
driver, which is checked before anything starts.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from accel_state import PrecisionType, get_current_device_type, is_initialized, patch_environment
from accel_state import environment_variables as contract

from ..configs._limits import check_machines, check_processes_per_machine

# Libraries known to initialise the accelerator's driver when imported.
_INITIALISE_DEVICE_ON_IMPORT = ("bitsandbytes",)


class _Worker:
    """The body of each started process: forget any state inherited from the parent, then run
    ``function``. A module-level class, so ``spawn`` can pickle it (by reference) too."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        # The agent names the run after its entry point.
        self.__name__ = getattr(function, "__name__", type(function).__name__)
        self.__qualname__ = getattr(function, "__qualname__", self.__name__)

    def __call__(self, *args: Any) -> Any:
        from accel_state.testing import reset_state

        reset_state()
        return self.function(*args)


# Distributed types whose processes are numbered by the launcher's index on this machine.
_MULTI_PROCESS = frozenset(
    "MULTI_CPU MULTI_GPU MULTI_MLU MULTI_MUSA MULTI_NPU MULTI_XPU MULTI_SDAA MULTI_HPU "
    "MULTI_NEURON".split()
)


class PrepareForLaunch:
    """A function made ready to run in a process started by ``torch.multiprocessing``
    (``start_processes``/``spawn``), which calls it with the process's index first.

    Called as ``prepared(index, *args)``, it gives the process its place in the run through the
    environment, forgets any shared state inherited from the parent (the notebook launcher's
    worker), then calls ``launcher(*args)``:

    - multi-process types (``MULTI_CPU``, ``MULTI_GPU`` ...): ``LOCAL_RANK`` is ``index`` and
      ``RANK`` is ``NPROC * NODE_RANK + index`` (``NPROC`` processes per machine, default 1;
      ``NODE_RANK`` default 0);
    - ``debug=True``: ``RANK`` and ``LOCAL_RANK`` are ``index``, and the gloo process group of
      ``WORLD_SIZE`` processes is joined at once through ``MASTER_ADDR``/``MASTER_PORT``;
    - always: ``ACCEL_FORK_LAUNCHED=1`` (read as ``PartialState().fork_launched``).

    Args:
        launcher: The function each process runs.
        distributed_type: A ``DistributedType`` member or value (``"MULTI_CPU"``).
        debug: Join a gloo group of CPU processes before calling ``launcher``.

    Raises:
        ValueError: ``distributed_type`` is not a distributed type.

    Example:
        >>> import torch.multiprocessing as mp
        >>> prepared = PrepareForLaunch(train, distributed_type="MULTI_CPU")
        >>> mp.start_processes(prepared, args=(config,), nprocs=2, start_method="fork")
    """

    def __init__(
        self, launcher: Callable[..., Any], distributed_type: Any = "NO", debug: bool = False
    ) -> None:
        from accel_state import DistributedType

        try:
            self.distributed_type = DistributedType(
                str(getattr(distributed_type, "value", distributed_type))
            )
        except ValueError:
            raise ValueError(
                "PrepareForLaunch: distributed_type must be one of "
                f"{[member.value for member in DistributedType]}; got {distributed_type!r}. "
                "Pass e.g. distributed_type='MULTI_CPU'."
            ) from None
        self.launcher = launcher
        self.debug = debug

    def __call__(self, index: int, *args: Any) -> Any:
        import os

        if self.debug:
            self._join_debug_group(index)
        elif self.distributed_type.value in _MULTI_PROCESS:
            per_machine = int(os.environ.get("NPROC", 1))
            machine = int(os.environ.get("NODE_RANK", 0))
            os.environ["LOCAL_RANK"] = str(index)
            os.environ["RANK"] = str(per_machine * machine + index)
        os.environ[contract.ACCEL_FORK_LAUNCHED] = "1"
        return _Worker(self.launcher)(*args)

    @staticmethod
    def _join_debug_group(index: int) -> None:
        import os

        import torch.distributed as dist

        missing = [
            name
            for name in ("WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
            if not os.environ.get(name)
        ]
        if missing:
            raise RuntimeError(
                "PrepareForLaunch(debug=True) joins a gloo group through the variables "
                f"WORLD_SIZE, MASTER_ADDR and MASTER_PORT; {missing} are not set in process "
                f"{index}. Set them before starting the processes, or use debug_launcher, "
                "which sets them."
            )
        os.environ["RANK"] = os.environ["LOCAL_RANK"] = str(index)
        dist.init_process_group(
            "gloo", rank=index, world_size=int(os.environ["WORLD_SIZE"]), init_method="env://"
        )


def _positive_int(name: str, value: object, example: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"notebook_launcher: {name} must be a positive integer; got {value!r}. "
            f"Pass e.g. {name}={example}."
        )
    return value


def _check_node_rank(node_rank: object, num_nodes: int) -> int:
    if isinstance(node_rank, bool) or not isinstance(node_rank, int) or node_rank < 0:
        raise ValueError(
            f"notebook_launcher: node_rank must be an integer >= 0; got {node_rank!r}. "
            "Pass node_rank=0 on the first machine, 1 on the second ..."
        )
    if node_rank >= num_nodes:
        raise ValueError(
            f"notebook_launcher: node_rank must be less than num_nodes; got node_rank="
            f"{node_rank} with num_nodes={num_nodes}. Number the machines 0 to {num_nodes - 1}."
        )
    return node_rank


def _default_num_processes(device_type: str) -> int:
    """One process per device of this machine's accelerator family; 1 on a CPU-only machine."""
    if device_type == "cpu":
        return 1
    import torch

    module = getattr(torch, device_type, None)
    return max(1, int(module.device_count())) if module is not None else 1


def check_parent_can_fork(device_type: str) -> None:
    """Refuse to fork when the parent process holds what forked children cannot share.

    Raises:
        ValueError: if an ``Accelerator`` (accelerator state) exists in this process.
        RuntimeError: if a ``torch.distributed`` process group exists in this process, the
            CUDA driver was initialised here, or (on an accelerator) a library that initialises
            the driver on import (bitsandbytes) was imported.
    """
    import torch

    restart = (
        "Restart the kernel and create it only inside the function you pass to notebook_launcher."
    )
    if is_initialized():
        raise ValueError(
            "notebook_launcher starts new processes, and each needs its own Accelerator; got an "
            f"Accelerator (accelerator state) already created in this process. {restart}"
        )
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        raise RuntimeError(
            "notebook_launcher starts its processes' group itself, so this process must not "
            "have one; got a torch.distributed process group already initialised here "
            f"(backend {torch.distributed.get_backend()!r}, world size "
            f"{torch.distributed.get_world_size()}). Call "
            "torch.distributed.destroy_process_group() first, or restart the kernel and "
            "initialise it only inside the function you pass to notebook_launcher."
        )
    if device_type == "cuda" and torch.cuda.is_initialized():
        raise RuntimeError(
            "notebook_launcher forks its processes, and CUDA cannot be used in a process "
            "forked after CUDA was initialised; got CUDA already initialised in this process "
            "(a tensor was moved to the GPU, or a library touched it on import). Restart the "
            "kernel and keep every CUDA call (and imports such as bitsandbytes) inside the "
            "function you pass to notebook_launcher."
        )
    touching = sorted(name for name in _INITIALISE_DEVICE_ON_IMPORT if name in sys.modules)
    if device_type != "cpu" and touching:
        raise RuntimeError(
            "notebook_launcher forks its processes, so no library that initialises the "
            f"{device_type.upper()} driver on import may be imported before; got {touching} "
            "imported in this process. Restart the kernel and import them inside the function "
            "you pass to notebook_launcher."
        )


def notebook_launcher(
    function: Callable[..., Any],
    args: Sequence[Any] = (),
    num_processes: int | None = None,
    mixed_precision: str = "no",
    use_port: str = "29500",
    master_addr: str = "127.0.0.1",
    node_rank: int = 0,
    num_nodes: int = 1,
    rdzv_backend: str = "static",
    rdzv_endpoint: str = "",
    rdzv_conf: dict[str, Any] | None = None,
    rdzv_id: str = "none",
    max_restarts: int = 0,
    monitor_interval: float = 0.1,
    log_line_prefix_template: str | None = None,
) -> None:
    """Run ``function(*args)`` on ``num_processes`` processes of this machine (and as many on
    each of ``num_nodes`` machines), from a notebook or any running Python session.

    Each process sees the launcher's variables, so ``Accelerator()`` created *inside*
    ``function`` joins a group of ``num_nodes * num_processes`` processes (gloo on CPU, nccl on
    CUDA ...) in ``mixed_precision``. With one process on one machine, ``function`` runs in this
    process. Create no ``Accelerator``, process group or CUDA tensor before the call: the
    processes are forked from this one (spawned on XPU and ROCm).

    Args:
        function: What each process runs. With ``spawn`` (XPU, ROCm) it must be importable.
        args: Positional arguments passed to ``function`` in every process.
        num_processes: Processes on this machine; default one per device of this machine's
            accelerator, 1 on a CPU-only machine.
        mixed_precision: ``"no"``, ``"fp16"``, ``"bf16"`` or ``"fp8"``, given to each process as
            ``ACCEL_MIXED_PRECISION``.
        use_port: Port of the rendezvous on ``master_addr`` (the node of rank 0).
        master_addr: Address of the node of rank 0.
        node_rank: Rank of this machine, from 0 to ``num_nodes - 1``.
        num_nodes: Number of machines; call ``notebook_launcher`` on each.
        rdzv_backend: Rendezvous of torch elastic: ``"static"`` (node ranks given) or
            ``"c10d"`` (ranks assigned on arrival).
        rdzv_endpoint: ``host:port`` of the rendezvous (default ``master_addr:use_port``).
        rdzv_conf: Extra rendezvous settings (``{"timeout": 60}`` ...).
        rdzv_id: Run id shared by the machines of one run.
        max_restarts: How many times the whole group is started again after a process fails.
        monitor_interval: Seconds between two checks of the processes' health.
        log_line_prefix_template: Prefix of each output line of the agent (``"[${rank}]"``).

    Raises:
        ValueError: on a bad argument (more processes or machines than the limits of
            ``accel launch`` allow included), or when an ``Accelerator`` exists in this process.
        RuntimeError: when this process has a process group or initialised CUDA.
        torch.distributed.elastic.multiprocessing.errors.ChildFailedError: when a process
            failed more than ``max_restarts`` times (with each failure's traceback).

    Example:
        >>> def train(learning_rate):
        ...     accelerator = Accelerator()
        ...     ...
        >>> notebook_launcher(train, args=(1e-3,), num_processes=2, mixed_precision="bf16")
    """
    precision = PrecisionType.parse(mixed_precision, "notebook_launcher: mixed_precision")
    num_nodes = _positive_int("num_nodes", num_nodes, "2")
    node_rank = _check_node_rank(node_rank, num_nodes)
    if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < 0:
        raise ValueError(
            f"notebook_launcher: max_restarts must be an integer >= 0; got {max_restarts!r}. "
            "Pass e.g. max_restarts=1."
        )
    device_type, _ = get_current_device_type()
    if num_processes is None:
        num_processes = _default_num_processes(device_type)
    num_processes = _positive_int("num_processes", num_processes, "2")
    check_machines(num_nodes, who="notebook_launcher: num_nodes", fix="Pass num_nodes=N")
    check_processes_per_machine(
        num_processes,
        who=f"notebook_launcher: num_processes={num_processes}",
        fix=lambda limit: f"Pass num_processes={limit} or fewer (the processes of this machine)",
    )
    if num_processes == 1 and num_nodes == 1:
        print(f"Launching training on one {device_type.upper()} in this process.")
        with patch_environment(**{contract.ACCEL_MIXED_PRECISION: precision.value}):
            function(*args)
        return
    check_parent_can_fork(device_type)
    _launch_elastic(
        _Worker(function),
        tuple(args),
        device_type=device_type,
        num_processes=num_processes,
        precision=precision.value,
        use_port=str(use_port),
        master_addr=master_addr,
        node_rank=node_rank,
        num_nodes=num_nodes,
        rdzv_backend=rdzv_backend,
        rdzv_endpoint=rdzv_endpoint,
        rdzv_conf=dict(rdzv_conf or {}),
        rdzv_id=rdzv_id,
        max_restarts=max_restarts,
        monitor_interval=monitor_interval,
        log_line_prefix_template=log_line_prefix_template,
    )


def _launch_elastic(
    worker: _Worker,
    args: tuple[Any, ...],
    *,
    device_type: str,
    num_processes: int,
    precision: str,
    use_port: str,
    master_addr: str,
    node_rank: int,
    num_nodes: int,
    rdzv_backend: str,
    rdzv_endpoint: str,
    rdzv_conf: dict[str, Any],
    rdzv_id: str,
    max_restarts: int,
    monitor_interval: float,
    log_line_prefix_template: str | None,
) -> None:
    """Start the processes through torch elastic's agent and wait for them."""
    from accel_state import is_rocm_available
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    if rdzv_backend == "static":
        rdzv_conf["rank"] = node_rank
        rdzv_endpoint = rdzv_endpoint or f"{master_addr}:{use_port}"
    start_method = "spawn" if device_type == "xpu" or is_rocm_available() else "fork"
    config = LaunchConfig(
        min_nodes=num_nodes,
        max_nodes=num_nodes,
        nproc_per_node=num_processes,
        run_id=rdzv_id,
        rdzv_endpoint=rdzv_endpoint,
        rdzv_backend=rdzv_backend,
        rdzv_configs=rdzv_conf,
        max_restarts=max_restarts,
        monitor_interval=monitor_interval,
        start_method=start_method,
        log_line_prefix_template=log_line_prefix_template,
    )
    where = f" on node {node_rank} of {num_nodes}" if num_nodes > 1 else ""
    print(f"Launching training on {num_processes} {device_type.upper()} processes{where}.")
    # The agent gives each process its rank, world size and rendezvous address; the rest of
    # the contract is inherited from this process's environment, ACCEL_FORK_LAUNCHED included
    # (read as PartialState.fork_launched).
    forked = "1" if start_method == "fork" else "0"
    with patch_environment(
        **{contract.ACCEL_MIXED_PRECISION: precision, contract.ACCEL_FORK_LAUNCHED: forked}
    ):
        elastic_launch(config=config, entrypoint=worker)(*args)


__all__ = ["PrepareForLaunch", "check_parent_can_fork", "notebook_launcher"]
