"""Lazy module attributes: a name -> module map resolved on first access and cached.

Every lazy namespace of the accel packages (``accel_state``, ``accel_launch``, ``accel``,
``accel.utils``, ``accel.state`` ...) is built by `lazy_module`, so importing one costs
nothing until a name is used. This module imports nothing but the standard library.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from importlib import import_module
from typing import Any

__all__ = ["lazy_module"]


def lazy_module(
    namespace: dict[str, Any],
    exports: Mapping[str, str],
    *,
    submodules: Collection[str] = (),
    distribution: str | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for a module whose names live in other modules.

    Use it at module level: ``__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)``.

    Args:
        namespace: The module's ``globals()``. A resolved name is cached there, so each name is
            looked up once; a relative module path in ``exports`` (``"._machine._memory"``) resolves
            against the module's ``__package__``.
        exports: Maps each public name to the module that defines it, absolute
            (``"accel_state"``) or relative (``"._machine._memory"``).
        submodules: Names of the package's own submodules that attribute access imports on
            first use (``accel.utils.modeling`` without ``import accel.utils.modeling``).
        distribution: The installed distribution whose version ``__version__`` reads, on first
            access: reading it at import would load ``importlib.metadata``, which costs more than
            the rest of the import.

    Returns:
        The module-level ``__getattr__`` and ``__dir__`` (PEP 562). ``__getattr__`` raises
        `AttributeError` for a name that is neither exported nor a submodule, naming the
        module, the name and the closest exported names.
    """
    module_name: str = namespace["__name__"]
    package: str = namespace.get("__package__") or module_name

    def __getattr__(name: str) -> Any:
        source = exports.get(name)
        if source is None:
            if name == "__version__" and distribution is not None:
                from importlib.metadata import version

                namespace[name] = version(distribution)
                return namespace[name]
            if name in submodules:
                return import_module(f"{module_name}.{name}")
            raise AttributeError(_unknown_name(module_name, name, exports, submodules), name=name)
        value = getattr(import_module(source, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        version = {"__version__"} if distribution is not None else set()
        return sorted(set(namespace) | set(exports) | set(submodules) | version)

    return __getattr__, __dir__


def _unknown_name(
    module_name: str, name: str, exports: Mapping[str, str], submodules: Collection[str]
) -> str:
    """The message for a name a lazy module does not have: rule, value, fix."""
    message = f"module {module_name!r} has no attribute {name!r}"
    if name.startswith("__") and name.endswith("__"):
        # Probes such as ``hasattr(module, "__path__")`` are frequent and expected to fail.
        return message
    from difflib import get_close_matches

    close = get_close_matches(name, [*exports, *submodules], n=3)
    fix = (
        f"did you mean {' or '.join(repr(c) for c in close)}?"
        if close
        else f"check the spelling against dir({module_name})"
    )
    return (
        f"{message}: its names are the {len(exports)} it exports (__all__)"
        + (f" and its submodules {', '.join(sorted(submodules))}" if submodules else "")
        + f"; {fix}"
    )
