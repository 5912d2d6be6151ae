"""Functions that code written for the reference library replaces by assigning a module
attribute, and the assignment reaching accel's code.

The reference's functions call each other through their module's namespace, so assigning
``accelerate.big_modeling.check_device_map = f`` changes what ``dispatch_model`` runs
(transformers does this for models with ``_no_placement_params``). accel's module at that path
only re-exports names; `REPLACEABLE` lists, per module, the names whose assignment is
forwarded to the package whose code looks them up when it runs.
"""

from __future__ import annotations

import sys
import types
from importlib import import_module
from typing import Any

REPLACEABLE: dict[str, dict[str, str]] = {
    # transformers.integrations.accelerate.skip_device_map_check
    "accel.big_modeling": {"check_device_map": "accel_bigmodel"},
}
"""Module -> {name -> the package whose code calls ``package.name`` at run time}."""


class _ReplaceableModule(types.ModuleType):
    """A module whose assignments of the names in `REPLACEABLE` also reach the package
    that uses them (and whose deletions restore that package's own)."""

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        owner = REPLACEABLE.get(self.__name__, {}).get(name)
        if owner is not None:
            setattr(import_module(owner), name, value)

    def __delattr__(self, name: str) -> None:
        super().__delattr__(name)
        owner = REPLACEABLE.get(self.__name__, {}).get(name)
        if owner is not None:
            package = import_module(owner)
            if name in vars(package):
                delattr(package, name)  # the package's lazy table gives its own back


def make_replaceable(module_name: str) -> None:
    """Forward the assignments of ``module_name``'s names listed in `REPLACEABLE`."""
    sys.modules[module_name].__class__ = _ReplaceableModule
