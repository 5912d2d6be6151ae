"""Layer-wise casting: weights stored in a small dtype, upcast for each forward only."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any, Union

import torch
from torch import nn

from ._hooks import ModelHook, add_hook_to_module

logger = logging.getLogger("accel_bigmodel.big_modeling")

SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING: tuple[type[nn.Module], ...] = (
    nn.Conv1d,
    nn.Conv2d,
    nn.Conv3d,
    nn.ConvTranspose1d,
    nn.ConvTranspose2d,
    nn.ConvTranspose3d,
    nn.Linear,
)
"""The layers [`attach_layerwise_casting_hooks`][accel_bigmodel.attach_layerwise_casting_hooks] casts: their forward reads only their own
weights, so upcasting them around it is enough."""


def _check_dtype(value: Any, argument: str) -> None:
    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        raise TypeError(
            f"{argument} must be a floating torch.dtype (e.g. torch.float8_e4m3fn, "
            f"torch.bfloat16); got {value!r}. Pass one of torch's floating dtypes."
        )


class LayerwiseCastingHook(ModelHook):
    """Keeps a module's floating weights in ``storage_dtype`` and casts them to
    ``compute_dtype`` for the time of each forward.

    Attaching it casts the module to ``storage_dtype``; before each forward the module goes to
    ``compute_dtype``, after it back to ``storage_dtype`` (also when the forward raises).
    Values exactly representable in ``storage_dtype`` survive the round trip unchanged.

    Args:
        storage_dtype: The dtype weights are kept in between forwards.
        compute_dtype: The dtype the forward runs in.
        non_blocking: Cast asynchronously where the device allows it.
    """

    def __init__(
        self, storage_dtype: torch.dtype, compute_dtype: torch.dtype, non_blocking: bool
    ) -> None:
        _check_dtype(storage_dtype, "storage_dtype")
        _check_dtype(compute_dtype, "compute_dtype")
        self.storage_dtype = storage_dtype
        self.compute_dtype = compute_dtype
        self.non_blocking = non_blocking

    def _cast(self, module: nn.Module, dtype: torch.dtype) -> None:
        module.to(dtype=dtype, non_blocking=self.non_blocking)

    def init_hook(self, module: nn.Module) -> nn.Module:
        self._cast(module, self.storage_dtype)
        forward: Callable[..., Any] = module._old_forward  # type: ignore[assignment]

        def forward_restoring_storage(*args: Any, **kwargs: Any) -> Any:
            try:
                return forward(*args, **kwargs)
            except BaseException:
                self._cast(module, self.storage_dtype)
                raise

        module._old_forward = forward_restoring_storage  # type: ignore[assignment]
        self._original_forward = forward
        return module

    def pre_forward(self, module: nn.Module, *args: Any, **kwargs: Any) -> tuple[tuple, dict]:
        self._cast(module, self.compute_dtype)
        return args, kwargs

    def post_forward(self, module: nn.Module, output: Any) -> Any:
        self._cast(module, self.storage_dtype)
        return output

    def detach_hook(self, module: nn.Module) -> nn.Module:
        if getattr(module, "_old_forward", None) is not None:
            module._old_forward = self._original_forward  # type: ignore[assignment]
        return module


def _patterns(value: Union[str, tuple[str, ...], None]) -> tuple[str, ...]:
    if value is None:
        return ()
    patterns = (value,) if isinstance(value, str) else tuple(value)
    for pattern in patterns:
        if not isinstance(pattern, str):
            raise TypeError(
                "skip_modules_pattern must be a regular expression or a tuple of them; got "
                f"{value!r}. Pass e.g. ('norm', r'^head$')."
            )
        re.compile(pattern)
    return patterns


def attach_layerwise_casting_hooks(
    module: nn.Module,
    storage_dtype: torch.dtype,
    compute_dtype: torch.dtype,
    skip_modules_pattern: Union[str, tuple[str, ...], None] = None,
    skip_modules_classes: tuple[type[nn.Module], ...] | None = None,
    non_blocking: bool = False,
) -> None:
    """Store the weights of ``module``'s layers in ``storage_dtype`` and compute in
    ``compute_dtype``: each layer of [`SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING`][accel_bigmodel.SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING] gets a
    [`LayerwiseCastingHook`][accel_bigmodel.LayerwiseCastingHook], so only the layer running holds full-size weights.

    Less memory than keeping the model in ``compute_dtype``, at the price of the rounding to
    ``storage_dtype`` (done once, when the hooks are attached) and a cast per forward. Layers
    of other kinds (norms, embeddings) keep their dtype.

    Args:
        module: The model (or any module).
        storage_dtype: The dtype weights are kept in (``torch.float8_e4m3fn``, ``torch.bfloat16``).
        compute_dtype: The dtype forwards run in.
        skip_modules_pattern: Regular expressions; a submodule whose qualified name matches one
            (``re.search``) is left as it is, with everything under it.
        skip_modules_classes: Module classes left as they are, with everything under them.
        non_blocking: Cast asynchronously where the device allows it.

    Raises:
        TypeError: a dtype is not a floating ``torch.dtype``, or a pattern is not a string.

    Example:
        >>> attach_layerwise_casting_hooks(model, torch.float8_e4m3fn, torch.bfloat16,
        ...                                skip_modules_pattern=("norm",))  # doctest: +SKIP
    """
    _check_dtype(storage_dtype, "storage_dtype")
    _check_dtype(compute_dtype, "compute_dtype")
    patterns = _patterns(skip_modules_pattern)
    classes = tuple(skip_modules_classes or ())
    stack: list[tuple[str, nn.Module]] = [("", module)]
    while stack:
        name, current = stack.pop()
        skipped = isinstance(current, classes) if classes else False
        if skipped or any(re.search(pattern, name) for pattern in patterns):
            logger.debug("layerwise casting skips %r", name)
            continue
        if isinstance(current, SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING):
            hook = LayerwiseCastingHook(storage_dtype, compute_dtype, non_blocking)
            add_hook_to_module(current, hook, append=True)
            continue
        children = [
            (f"{name}.{child}" if name else child, sub) for child, sub in current.named_children()
        ]
        stack.extend(reversed(children))
