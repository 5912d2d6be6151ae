"""Small helpers on plain Python objects and local ports, as the reference exposes them."""

from __future__ import annotations

import functools
import socket
from collections.abc import MutableMapping
from typing import Any


def get_pretty_name(obj: Any) -> str:
    """The qualified name of a class or function, or of an instance's class.

    Example:
        >>> get_pretty_name(torch.optim.SGD([]))
        'SGD'
    """
    if not hasattr(obj, "__qualname__") and not hasattr(obj, "__name__"):
        obj = getattr(obj, "__class__", obj)
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    return str(name) if name is not None else str(obj)


def merge_dicts(
    source: MutableMapping[str, Any], destination: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """Merge ``source`` into ``destination`` recursively (nested dicts are merged, other values
    from ``source`` win) and return ``destination``."""
    for key, value in source.items():
        if isinstance(value, dict):
            merge_dicts(value, destination.setdefault(key, {}))
        else:
            destination[key] = value
    return destination


def recursive_getattr(obj: Any, attr: str) -> Any:
    """``getattr`` along a dotted path: ``recursive_getattr(model, "encoder.layer.0")``.

    Raises:
        AttributeError: naming the first part of the path that does not exist.
    """
    return functools.reduce(getattr, attr.split("."), obj)


def is_port_in_use(port: int | None = None) -> bool:
    """Whether something listens on ``port`` (default 29500, torch's rendezvous port) of
    localhost."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(("localhost", 29500 if port is None else port)) == 0


def get_free_port() -> int:
    """A TCP port that nothing uses right now (the operating system picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])
