"""Background preparation of the next offloaded module's weights."""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

if TYPE_CHECKING:
    from ._align_devices import AlignDevicesHook

_PAGE = 4096


def touch_pages(tensor: torch.Tensor) -> None:
    """Reads one byte per page of a CPU tensor so a memory-mapped file is paged in now."""
    if tensor.device.type != "cpu" or tensor.numel() == 0 or not tensor.is_contiguous():
        return
    try:
        flat = tensor.reshape(-1).view(torch.uint8)
    except RuntimeError:
        return
    if flat.numel() > _PAGE:
        flat[::_PAGE].max()


def _shutdown(executor: ThreadPoolExecutor) -> None:
    executor.shutdown(wait=False, cancel_futures=True)


class Prefetcher:
    """While an offloaded module runs, prepares the weights of the one after it.

    On the CPU the prepared weights are views of memory-mapped files whose pages are read in by
    a background thread; on an accelerator they are copies already on the device. The order is
    the module order, wrapping around so the next forward call starts warm.

    Args:
        hooks: The offloading hooks, in execution order.
        max_pending: How many prepared modules may wait at once.
    """

    def __init__(self, hooks: list[AlignDevicesHook], max_pending: int = 2) -> None:
        self.hooks = hooks
        self.position = {id(h): i for i, h in enumerate(hooks)}
        self.max_pending = max_pending
        self.pending: OrderedDict[int, Future] = OrderedDict()
        self.lock = threading.Lock()
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="accel-prefetch")
        self._finalizer = weakref.finalize(self, _shutdown, self.executor)
        self.hits = 0
        self.misses = 0

    @staticmethod
    def _prepare(hook: AlignDevicesHook) -> dict[str, torch.Tensor]:
        values = hook.fetch_weights()
        for tensor in values.values():
            touch_pages(tensor)
        return values

    def take(self, hook: AlignDevicesHook) -> dict[str, Any] | None:
        """The prepared weights of ``hook`` (waiting for them if in flight), or ``None``."""
        with self.lock:
            future = self.pending.pop(id(hook), None)
        if future is None:
            self.misses += 1
            return None
        try:
            result = future.result()
        except Exception:
            self.misses += 1
            return None
        self.hits += 1
        return result

    def schedule_after(self, hook: AlignDevicesHook) -> None:
        """Starts preparing the module that follows ``hook``."""
        index = self.position.get(id(hook))
        if index is None:
            return
        following = self.hooks[(index + 1) % len(self.hooks)]
        if following is hook:
            return
        with self.lock:
            if id(following) in self.pending:
                return
            while len(self.pending) >= self.max_pending:
                _, stale = self.pending.popitem(last=False)
                stale.cancel()
            self.pending[id(following)] = self.executor.submit(self._prepare, following)

    def close(self) -> None:
        """Stops the background thread."""
        with self.lock:
            self.pending.clear()
        self._finalizer()


def offloaded_hooks(model: nn.Module) -> list[AlignDevicesHook]:
    """The offloading :class:`AlignDevicesHook` objects of a model, in module order."""
    from ._align_devices import AlignDevicesHook
    from ._hooks import SequentialHook

    found: list[AlignDevicesHook] = []
    for module in model.modules():
        hook = getattr(module, "_hf_hook", None)
        stack = [hook]
        while stack:
            current = stack.pop(0)
            if isinstance(current, SequentialHook):
                stack = list(current.hooks) + stack
            elif (
                isinstance(current, AlignDevicesHook)
                and current.offload
                and current.offloaded_names
            ):
                found.append(current)
    return found


def attach_prefetcher(model: nn.Module) -> Prefetcher | None:
    """Links the offloaded hooks of ``model`` so each prepares the next one's weights."""
    hooks = offloaded_hooks(model)
    if len(hooks) < 2:
        return None
    prefetcher = Prefetcher(hooks)
    for hook in hooks:
        hook.prefetcher = prefetcher
    model._accel_prefetcher = prefetcher  # type: ignore[assignment]  # stubs: Tensor | Module
    return prefetcher
