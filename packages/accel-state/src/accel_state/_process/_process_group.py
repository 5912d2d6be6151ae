"""Starting the default process group so that a restarted job forms a fresh one.

torchrun's static rendezvous (``--master_addr/--master_port``) keeps one TCP store for the whole
job: when it restarts the workers after a failure, the new workers join the same store, where
the keys of the previous attempt (each rank's gloo address, barrier counters, checkpoint
rendezvous keys) are still present. A new rank 0 that reads the address its dead peer left
there fails with ``Connection refused`` in gloo's ``connectFullMesh``. Every attempt therefore
works under its own key prefix of that store (``accel/<run id>/attempt_<n>/``).
"""

from __future__ import annotations

import datetime
import os
from typing import Any

import torch.distributed as dist

from .._env._launcher import WorldInfo
from ..hang_watchdog import hang_timeout, start_watchdog

_DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)


def attempt_prefix() -> str | None:
    """The store prefix of this attempt of a torchrun job, or None outside torchrun's store."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "none")
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return f"accel/{run_id}/attempt_{attempt}/"


def init_default_group(backend: str, world: WorldInfo, kwargs: dict[str, Any]) -> None:
    """Call ``init_process_group`` for ``world``, in this attempt's own part of the store,
    then start the hang watchdog (`accel_state.hang_watchdog`).

    Args:
        backend: ``gloo``, ``nccl`` ...
        world: Rank and size from the launcher's variables.
        kwargs: Other ``init_process_group`` arguments; an explicit ``init_method`` or
            ``store`` is used as given.
    """
    prefix = attempt_prefix()
    explicit = kwargs.get("init_method") is not None or kwargs.get("store") is not None
    if prefix is not None and not explicit and world.master_addr and world.master_port:
        timeout = kwargs.get("timeout") or _DEFAULT_TIMEOUT
        client = dist.TCPStore(
            world.master_addr,
            int(world.master_port),
            world.world_size,
            is_master=False,
            timeout=timeout,
        )
        kwargs = {**kwargs, "store": dist.PrefixStore(prefix, client)}
    dist.init_process_group(backend=backend, rank=world.rank, world_size=world.world_size, **kwargs)
    start_watchdog(
        world.rank,
        world.world_size,
        world.master_addr,
        world.master_port,
        prefix or "accel/",
        hang_timeout(kwargs.get("timeout")),
    )
