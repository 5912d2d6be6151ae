"""Out-of-memory helpers: retry with a smaller batch, release references."""

from __future__ import annotations

import functools
import gc
import inspect
from collections.abc import Callable
from typing import Any

import torch

from ._availability import is_torch_version

_OOM_MESSAGES = (
    "CUDA out of memory.",
    "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED.",
    "DefaultCPUAllocator: can't allocate memory",
    "XPU out of memory.",
    "out of memory",
    "MPS backend out of memory",
    "FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed",
)


def should_reduce_batch_size(exception: BaseException) -> bool:
    """Whether ``exception`` is an out-of-memory error that a smaller batch may avoid."""
    if isinstance(exception, torch.cuda.OutOfMemoryError | MemoryError):
        return True
    if isinstance(exception, RuntimeError) and len(exception.args) == 1:
        return any(message in str(exception.args[0]) for message in _OOM_MESSAGES)
    return False


def clear_device_cache(garbage_collection: bool = False) -> None:
    """Collect garbage (optionally) and empty the allocator cache of this machine's
    accelerator family (``torch.npu.empty_cache()`` on an Ascend machine, ``torch.mps`` on
    Apple ...). Gaudi HPUs reserve their memory per process and have no cache to empty."""
    from ._families import accelerator_module, family_available

    if garbage_collection:
        gc.collect()
    accelerator = accelerator_module()
    if accelerator is not None:
        device, module = accelerator
        if device != "hpu":
            module.empty_cache()  # type: ignore[attr-defined]
    elif family_available("mps") and is_torch_version(">=", "2.0"):
        torch.mps.empty_cache()


def release_memory(*objects: Any) -> list[None]:
    """Drop the given references, collect garbage and empty device caches.

    Use as ``a, b = release_memory(a, b)``.
    """
    result: list[None] = [None] * len(objects)
    del objects
    clear_device_cache(garbage_collection=True)
    return result


def find_executable_batch_size(
    function: Callable[..., Any] | None = None,
    starting_batch_size: int = 128,
    reduce_batch_size_fn: Callable[[], int] | None = None,
) -> Any:
    """Decorator: call ``function(batch_size, ...)``, halving ``batch_size`` after each
    out-of-memory error until it runs. Other errors propagate unchanged.

    ``function`` must take the batch size as its first argument, and the caller must not pass
    it: ``train()`` not ``train(64)``.

    Args:
        function: The function to run (None when used as ``@find_executable_batch_size(...)``).
        starting_batch_size: The first batch size tried.
        reduce_batch_size_fn: Called after each out-of-memory error; returns the next batch
            size to try (default: half the current one).
    """
    if function is None:
        return functools.partial(
            find_executable_batch_size,
            starting_batch_size=starting_batch_size,
            reduce_batch_size_fn=reduce_batch_size_fn,
        )

    batch_size = starting_batch_size

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal batch_size
        clear_device_cache(garbage_collection=True)
        params = list(inspect.signature(function).parameters)
        if len(params) < len(args) + 1:
            raise TypeError(
                f"{function.__name__} takes the batch size as its first argument, which "
                "find_executable_batch_size supplies; got it passed explicitly as well "
                f"({args[0]!r}). Call {function.__name__}() without the batch size."
            )
        while True:
            if batch_size == 0:
                raise RuntimeError(
                    "no executable batch size found: even a batch size of 1 ran out of memory."
                )
            try:
                return function(batch_size, *args, **kwargs)
            except Exception as err:
                if not should_reduce_batch_size(err):
                    raise
                clear_device_cache(garbage_collection=True)
                batch_size = reduce_batch_size_fn() if reduce_batch_size_fn else batch_size // 2

    return wrapper
