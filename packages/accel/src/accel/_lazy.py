"""Lazy re-exports: a name -> module map resolved on first attribute access and cached."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_module(
    namespace: dict[str, Any], exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for a module whose names live in other modules.

    Args:
        namespace: The module's ``globals()``; resolved names are cached there so the lookup
            runs once per name.
        exports: Maps each public name to the module that defines it.
    """
    module_name = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        source = exports.get(name)
        if source is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
