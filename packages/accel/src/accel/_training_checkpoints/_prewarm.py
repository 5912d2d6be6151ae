"""The host memory of the first asynchronous save, allocated before that save is called.

An asynchronous ``save_state`` copies every state into host buffers that it keeps for the next
save. The first one has to allocate them, and the system maps and zeroes every new page on
first touch: that made the first save block training for about six times as long as the later
ones. When the project saves asynchronously (``ProjectConfiguration(async_save=True)``), the
buffers are instead allocated, and every page touched once, on a background thread right after
the first optimizer step (the optimizer's state exists from then on, so every shape is known).
The first save finds them ready, as every later save does.

Memory cost: none beyond what the first asynchronous save would hold anyway (one host copy of
what this process writes), only held from the first step instead of from the first save. Only
the process that writes the replicated states (one process, DDP) holds such a copy; sharding
engines (FSDP, DeepSpeed) and the other processes are left alone.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from ._checkpointer import Checkpointer

_logger = logging.getLogger("accel.checkpointing")
_PAGE = 4096


def arm_prewarm(checkpointer: Checkpointer, optimizer: torch.optim.Optimizer) -> None:
    """After ``optimizer``'s next step, allocate the first asynchronous save's host buffers on
    a background thread (once per run; only when the project saves asynchronously)."""
    if not checkpointer.project_configuration.async_save or checkpointer.prewarm_armed:
        return
    if not checkpointer.engine.replicated_states or not checkpointer.is_writer:
        return
    register = getattr(optimizer, "register_step_post_hook", None)
    if register is None:
        return
    checkpointer.prewarm_armed = True

    def after_step(*_: Any) -> None:
        handle.remove()
        from .._core import _state_files  # noqa: F401  (loaded here, not on the thread)
        from .save import _async_save  # noqa: F401

        thread = threading.Thread(
            target=prewarm, args=(checkpointer,), name="accel-save-prewarm", daemon=True
        )
        checkpointer.prewarm_thread = thread
        thread.start()

    handle = register(after_step)


def prewarm(checkpointer: Checkpointer) -> None:
    """Allocate (and touch every page of) one host buffer per tensor the next asynchronous
    save of ``checkpointer`` copies, and leave them free in its pool."""
    from .._core._state_files import capture_rng_state, view_key
    from .save._async_save import HostBuffers

    try:
        if checkpointer.save_buffers is None:
            checkpointer.save_buffers = HostBuffers()
        pool = checkpointer.save_buffers
        engine = checkpointer.engine
        states: list[Any] = [engine.model_state_dict(m) for m in checkpointer.prepared.models]
        states += [engine.optimizer_state_dict(o) for o in checkpointer.prepared.optimizers]
        states.append(capture_rng_state())
        seen: set[Any] = set()
        tensors = [t for state in states for t in _tensors(state)]
        for tensor in tensors:
            key = view_key(tensor)
            if key in seen or tensor.device.type == "meta" or type(tensor) is not torch.Tensor:
                continue
            seen.add(key)
            pinned = torch.cuda.is_available() and tensor.device.type != "cpu"
            buffer = pool.take(tensor.shape, tensor.dtype, pinned)
            _touch(buffer)
        pool.reclaim()
        _logger.debug("prepared %.1f MB of host memory for asynchronous saves", pool.nbytes() / 1e6)
    except Exception as exc:  # an optimisation only: the first save allocates instead
        _logger.debug("host buffers for asynchronous saves not prepared: %s", exc)


def _tensors(state: Any) -> list[torch.Tensor]:
    if isinstance(state, torch.Tensor):
        return [state]
    if isinstance(state, dict):
        return [t for value in state.values() for t in _tensors(value)]
    if isinstance(state, (list, tuple)):
        return [t for value in state for t in _tensors(value)]
    return []


def _touch(buffer: torch.Tensor) -> None:
    """Write one byte of every page: the system maps and zeroes it now, not during a save."""
    raw = buffer.reshape(-1).view(torch.uint8) if buffer.numel() else buffer
    if raw.numel():
        raw[::_PAGE].fill_(0)
