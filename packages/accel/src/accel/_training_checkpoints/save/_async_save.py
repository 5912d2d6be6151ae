"""``save_state(..., async_save=True)``: a checkpoint written while training goes on.

The call has two halves:

1. On the calling thread, every process meets the others (as a synchronous save does), the
   writer creates the staging folder, the save hooks run, and every state is copied to host
   memory: model weights, optimizer states, schedulers, grad scaler, dataloader positions,
   registered objects and random states are all taken at the moment of the call, so the
   training steps that follow (which change parameters in place) do not reach the files.
   Sharding engines copy their shards the same way (see ``Engine.snapshot_sharded_states``).
2. A background thread writes those copies with the same writers as a synchronous save
   (safetensors, restricted pickles), flushes them, waits until every process has written
   its share, then commits: manifest, atomic rename and ``total_limit`` rotation. A crash
   before the commit leaves only the hidden ``.partial`` folder; the previous checkpoint is
   untouched and ``load_state("latest")`` loads it.

How the processes agree without disturbing training. The training thread keeps running
collectives on the default process group, and gloo matches collectives by their order on a
group: a barrier issued from the background thread of one process could pair with an
all-reduce of the other's training thread, and both would fail or hang. So the background
thread runs no collective on that group. It meets the other processes through keys of the
rendezvous store (``Rendezvous``), named by an operation number fixed on the calling thread
(every process calls ``save_state`` in the same order, so the numbers agree), and it waits by
polling the store, so the store's client (which serves one request at a time) is never held
for long. ``torch.distributed.checkpoint`` needs collectives of its own to plan a sharded
save; FSDP gives it dedicated gloo groups, created on the calling thread.

Memory cost: one host copy of everything this process writes, held from the call until its
files are on disk. With replicated states (one process, DDP) the main process holds a copy of
the full model weights and the full optimizer state (for Adam, three times the weights), the
others only their random states. With FSDP each process holds a copy of its own shards (the
full state on process 0 with ``FULL_STATE_DICT``). Tensors on an accelerator are copied into
pinned host memory. A later save waits for the previous one, so at most one copy is alive;
its memory is kept after the commit and reused by the next asynchronous save of the run
(fresh memory would cost more than the copy: the system maps and zeroes each page on first
touch), until ``end_training``.
"""

from __future__ import annotations

import atexit
import concurrent.futures.thread  # noqa: F401  (its exit hook must be registered before ours)
import copy
import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from ..._core._state_files import view_key

if TYPE_CHECKING:
    pass

_logger = logging.getLogger("accel.checkpointing")


class AsyncSaveError(RuntimeError):
    """The background write of an asynchronous ``save_state`` failed; the checkpoint was not
    committed and the previous one is kept."""


class AsyncCheckpoint:
    """Handle of a checkpoint being written in the background (``save_state(async_save=True)``).

    Attributes:
        path: The folder the checkpoint appears at once it is complete.
    """

    def __init__(
        self, path: str, target: Callable[[], None], on_done: Callable[[], None] | None = None
    ) -> None:
        self.path = path
        self._on_done = on_done
        self._error: BaseException | None = None
        self._reported = False
        self._thread = threading.Thread(
            target=self._run, args=(target,), name=f"accel-save {path}", daemon=False
        )

    def _start(self) -> None:
        _wait_at_exit(self)
        self._thread.start()

    def _run(self, target: Callable[[], None]) -> None:
        try:
            target()
        except BaseException as exc:  # kept for the caller of wait()
            self._error = exc
            _logger.error("asynchronous save_state of %s failed: %s", self.path, exc)
        finally:
            if self._on_done is not None:
                self._on_done()

    def done(self) -> bool:
        """Whether the background write has finished (committed or failed)."""
        return not self._thread.is_alive()

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """Wait up to ``timeout`` seconds (None: until done); the error of the write, if any.

        Raises:
            TimeoutError: the write is still running after ``timeout`` seconds.
        """
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(
                f"the asynchronous save of {self.path!r} is still writing after {timeout}s; "
                "call wait() without a timeout to wait until it is complete."
            )
        return self._error

    def wait(self, timeout: float | None = None) -> str:
        """Block until the checkpoint is committed; return its folder.

        Raises:
            AsyncSaveError: the background write failed (the error is chained); the
                checkpoint was not committed and earlier checkpoints are untouched.
            TimeoutError: still writing after ``timeout`` seconds.
        """
        error = self.exception(timeout)
        if error is not None:
            self._reported = True
            raise AsyncSaveError(
                f"an asynchronous save_state must write every file before it commits; writing "
                f"{self.path!r} failed with {type(error).__name__}: {str(error).rstrip('.')}. "
                "That checkpoint was not committed (earlier checkpoints are untouched): fix the "
                "cause and save again."
            ) from error
        return self.path

    def __repr__(self) -> str:
        state = "writing" if not self.done() else ("failed" if self._error else "committed")
        return f"AsyncCheckpoint({self.path!r}, {state})"


_in_flight: list[AsyncCheckpoint] = []
_exit_hook_lock = threading.Lock()
_exit_hook_installed = False


def _wait_at_exit(handle: AsyncCheckpoint) -> None:
    """Make the interpreter's normal exit wait for ``handle``'s commit.

    A non-daemon thread alone is not enough: when the main thread ends, the interpreter first
    runs the hooks registered with ``threading._register_atexit`` (newest first), and the one
    of ``concurrent.futures`` makes every executor refuse new work, which the writers and the
    checksum pass use. Ours is registered after that module's (imported above), so it runs
    first and the save completes with every executor still open.
    """
    global _exit_hook_installed
    with _exit_hook_lock:
        _in_flight[:] = [h for h in _in_flight if not h.done()]
        _in_flight.append(handle)
        if not _exit_hook_installed:
            register = getattr(threading, "_register_atexit", None)
            if register is not None:
                register(_finish_saves_at_exit)
            _exit_hook_installed = True


def _finish_saves_at_exit() -> None:
    """Wait for every asynchronous save still writing; on a failure, name the checkpoint and
    make the process exit with status 1 (after the other exit handlers ran)."""
    failed = []
    for handle in list(_in_flight):
        if not handle.done():
            _logger.info("waiting for the asynchronous save of %s before exiting", handle.path)
        error = handle.exception()
        if error is not None and not handle._reported:
            handle._reported = True
            failed.append((handle.path, error))
    _in_flight.clear()
    if not failed:
        return
    for path, error in failed:
        print(
            f"accel: the asynchronous save_state of {path!r} failed before the interpreter "
            f"exited ({type(error).__name__}: {error}); that checkpoint was not committed "
            "(earlier checkpoints are untouched). Exiting with status 1.",
            file=sys.stderr,
        )
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(1)


class HostBuffers:
    """Host tensors that hold the copies of asynchronous saves, kept from one save to the next.

    Allocating gigabytes of fresh memory for every save costs more than the copy itself (the
    operating system maps and zeroes every page on first touch); a run saves the same shapes
    each time, so the next save copies into the tensors of the previous one once it has been
    written. Only one save of a run is in flight at a time, so the tensors lent to it are all
    free again when it finishes (`reclaim`).
    """

    def __init__(self) -> None:
        self._free: dict[tuple[Any, ...], list[torch.Tensor]] = {}
        self._lent: list[torch.Tensor] = []
        self._lock = threading.Lock()

    def take(self, shape: torch.Size, dtype: torch.dtype, pinned: bool) -> torch.Tensor:
        """A contiguous host tensor of that shape and dtype (its content is undefined)."""
        key = (tuple(shape), dtype, pinned)
        with self._lock:
            free = self._free.get(key)
            tensor = free.pop() if free else torch.empty(shape, dtype=dtype, pin_memory=pinned)
            self._lent.append(tensor)
        return tensor

    def reclaim(self) -> None:
        """Make every lent tensor free again (the save that used them has finished)."""
        with self._lock:
            for tensor in self._lent:
                key = (tuple(tensor.shape), tensor.dtype, tensor.is_pinned())
                self._free.setdefault(key, []).append(tensor)
            self._lent.clear()

    def nbytes(self) -> int:
        """Bytes held, lent or free."""
        with self._lock:
            tensors = self._lent + [t for free in self._free.values() for t in free]
        return sum(t.numel() * t.element_size() for t in tensors)


def host_copy(state: Any, buffers: HostBuffers | None = None, pin: bool = False) -> Any:
    """A copy of ``state`` whose tensors live in host memory and share nothing with it.

    Tensors that are views of the same memory (tied weights) stay one tensor in the copy, so
    the writer still stores them once. Containers are rebuilt; other values are deep-copied
    (numbers and strings are kept as they are).

    Args:
        state: A state dict (nested dicts, lists, tuples of tensors and plain values).
        buffers: Where the host tensors come from (fresh ones when None).
        pin: Copy accelerator tensors into pinned host memory.
    """
    return _copy(state, {}, buffers or HostBuffers(), pin)


def _copy(
    value: Any, memo: dict[tuple[Any, ...], torch.Tensor], pool: HostBuffers, pin: bool
) -> Any:
    if isinstance(value, torch.Tensor):
        return _copy_tensor(value, memo, pool, pin)
    if isinstance(value, (str, bytes, int, float, bool, type(None))):
        return value
    if isinstance(value, dict):
        out = copy.copy(value)  # keeps the kind of dict (OrderedDict ...)
        for key, item in value.items():
            out[key] = _copy(item, memo, pool, pin)
        return out
    if type(value) in (list, tuple):
        return type(value)(_copy(item, memo, pool, pin) for item in value)
    return copy.deepcopy(value)


def _copy_tensor(
    tensor: torch.Tensor, memo: dict[tuple[Any, ...], torch.Tensor], pool: HostBuffers, pin: bool
) -> torch.Tensor:
    if tensor.device.type == "meta":
        return tensor
    key = view_key(tensor)
    found = memo.get(key)
    if found is not None:
        return found
    source = tensor.detach()
    if type(source) is not torch.Tensor:
        # A tensor subclass (DTensor ...): its own clone keeps its layout.
        result = source.clone()
    else:
        pinned = pin and source.device.type != "cpu"
        result = pool.take(source.shape, source.dtype, pinned)
        result.copy_(source, non_blocking=pinned)
    memo[key] = result
    return result
