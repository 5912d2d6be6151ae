"""Lazy re-exports: a name -> module map resolved on first attribute access and cached.

Every lazy namespace of accel (``accel``, ``accel.utils``, ``accel.state``,
``accel.utils.modeling`` ...) is built by :func:`lazy_module`, so importing one costs nothing
until a name is used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection, Mapping
from typing import Any


def lazy_module(
    namespace: dict[str, Any],
    exports: Mapping[str, str],
    submodules: Collection[str] = (),
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for a module whose names live in other modules.

    Args:
        namespace: The module's ``globals()``; resolved names are cached there so the lookup
            runs once per name.
        exports: Maps each public name to the module that defines it.
        submodules: Names of the package's submodules that attribute access imports on
            first use (``accel.utils.modeling`` without ``import accel.utils.modeling``).
    """
    module_name = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        source = exports.get(name)
        if source is None:
            if name in submodules:
                return importlib.import_module(f"{module_name}.{name}")
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports) | set(submodules))

    return __getattr__, __dir__
