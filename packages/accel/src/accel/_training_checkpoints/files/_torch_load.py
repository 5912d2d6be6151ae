"""``torch.load`` that never runs code from the file unless the caller asks for it by name."""

from __future__ import annotations

import codecs
import os
import pickle
from typing import IO, Any, Union

import numpy as np
import torch
from accel_bigmodel import UntrustedPickleError, safe_torch_load


def _numpy_globals() -> list[object]:
    multiarray = getattr(np, "_core", None) or np.core
    return [
        multiarray.multiarray._reconstruct,
        np.ndarray,
        codecs.encode,
        np.dtype,
        type(np.dtype(np.uint32)),
    ]


TORCH_SAFE_GLOBALS: list[Any] = _numpy_globals()
"""What ``load`` allows besides torch's ``weights_only`` allow-list: the functions and classes
that rebuild a numpy array of ``uint32`` (numpy's generator state, as ``torch.save`` pickles
it)."""


def load(
    f: Union[str, os.PathLike[str], IO[bytes]], map_location: Any = None, **kwargs: Any
) -> Any:
    """``torch.load`` with ``weights_only=True`` and numpy arrays allowed.

    Tensors, numbers, strings, containers and numpy arrays load; anything else in the pickle
    (an arbitrary class, a function call) is refused with ``UnsafeCheckpointError`` instead of
    run. ``weights_only=False`` is the explicit opt-in for a file you trust. torch's
    process-wide allow-list is the same after the call as before.

    Args:
        f: Path or binary file object.
        map_location: Where to put the tensors (as ``torch.load``).
        **kwargs: Other arguments of ``torch.load``.

    Raises:
        UnsafeCheckpointError: the file holds something ``weights_only`` refuses.
    """
    kwargs.setdefault("weights_only", True)
    if kwargs["weights_only"] is False:
        return torch.load(f, map_location=map_location, **kwargs)
    if isinstance(f, (str, os.PathLike)):
        kwargs.pop("weights_only")
        kwargs.setdefault("mmap", False)
        return safe_torch_load(
            f,
            allowed_globals=TORCH_SAFE_GLOBALS,
            opt_in="weights_only=False",
            map_location=map_location,
            **kwargs,
        )
    try:
        with torch.serialization.safe_globals(TORCH_SAFE_GLOBALS):
            return torch.load(f, map_location=map_location, **kwargs)
    except pickle.UnpicklingError as err:
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UntrustedPickleError(
            "load reads with torch.load(weights_only=True), which allows tensors, numbers, "
            f"strings, containers and numpy arrays only; the file object holds more "
            f"({first_line}). If you trust the file, pass weights_only=False; better, "
            "save plain state dicts.",
            path="",
        ) from None
