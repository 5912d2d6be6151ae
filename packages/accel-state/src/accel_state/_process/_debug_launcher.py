"""Run a function on several CPU processes of this machine, joined by gloo: for debugging and
tests of distributed code without a launcher."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from typing import Any

from .._env._launcher import patch_environment
from ..testing import free_port
from ._accelerator_state import AcceleratorState, GradientState


class _DebugWorker:
    """The body of each process: its rank in the environment, a fresh state, then ``function``."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function

    def __call__(self, index: int, *args: Any) -> None:
        import torch.distributed as dist

        from ._teardown import destroy_default_group

        os.environ["RANK"] = os.environ["LOCAL_RANK"] = str(index)
        # A forked process inherits the parent's state objects: start from none.
        AcceleratorState._reset_state(reset_partial_state=True)
        GradientState._reset_state()
        try:
            self.function(*args)
        finally:
            if dist.is_initialized():
                destroy_default_group()


def debug_launcher(
    function: Callable[..., Any], args: Sequence[Any] = (), num_processes: int = 2
) -> None:
    """Run ``function(*args)`` on ``num_processes`` CPU processes of this machine.

    Each process sees the variables a launcher would set (``RANK``, ``WORLD_SIZE``,
    ``MASTER_ADDR`` ...) plus ``ACCEL_USE_CPU=1``, so ``PartialState()`` inside ``function``
    joins a gloo group of ``num_processes`` CPU processes. The processes are forked, so
    ``function`` may be a closure. Returns when every process is done.

    Args:
        function: What each process runs.
        args: Positional arguments passed to ``function`` in every process.
        num_processes: How many processes to start.

    Raises:
        ValueError: if ``num_processes`` is not a positive integer.
        RuntimeError: if this platform cannot fork processes.
        torch.multiprocessing.ProcessRaisedException: if ``function`` raised in a process
            (with that process's traceback).

    Example:
        >>> def check():
        ...     state = PartialState()
        ...     assert state.num_processes == 2
        >>> debug_launcher(check, num_processes=2)
    """
    if isinstance(num_processes, bool) or not isinstance(num_processes, int) or num_processes < 1:
        raise ValueError(
            f"debug_launcher: num_processes must be a positive integer; got {num_processes!r}. "
            "Pass e.g. num_processes=2."
        )
    if "fork" not in multiprocessing.get_all_start_methods():
        raise RuntimeError(
            "debug_launcher forks its processes, and this platform cannot fork (start methods: "
            f"{multiprocessing.get_all_start_methods()}). Run the script with "
            "`accel launch --cpu --num_processes N` instead."
        )
    from torch.multiprocessing import start_processes

    with patch_environment(
        world_size=num_processes,
        local_world_size=num_processes,
        master_addr="127.0.0.1",
        master_port=free_port(),
        accel_use_cpu="1",
        accel_mixed_precision="no",
    ):
        start_processes(
            _DebugWorker(function), args=tuple(args), nprocs=num_processes, start_method="fork"
        )
