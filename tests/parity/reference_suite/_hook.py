"""Serve the reference library's import paths (``accelerate.*``) from accel.

The reference's own test suite imports ``accelerate``; with this finder first on
``sys.meta_path`` every such import gets accel's module at the same path (``accelerate.state``
is ``accel.state``), except ``accelerate.test_utils``: the suite's own helpers are read from
the reference's source folder named by ``ACCEL_REFERENCE_SRC``, their imports of the library
served by accel in turn.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from types import ModuleType

_PREFIX = "accelerate"
_HELPERS = "accelerate.test_utils"
# Reference module paths that accel does not have as modules: each is served by a module whose
# names resolve in these accel modules, in order (``accelerate.memory_utils.<name>`` is
# looked up in ``accel.utils.memory``, then ``accel.utils``).
_COMPOSED: dict[str, tuple[str, ...]] = {
    "accelerate.memory_utils": ("accel.utils.memory", "accel.utils"),
    "accelerate.parallelism_config": ("accel",),
    "accelerate.utils.rich": ("accel.utils",),
    "accelerate.utils.torch_xla": ("accel.utils",),
    "accelerate.utils.transformer_engine": ("accel.utils",),
}


def _composed_module(fullname: str, sources: tuple[str, ...]) -> ModuleType:
    """A module whose attributes are looked up in ``sources`` on first access."""
    module = ModuleType(fullname)

    def __getattr__(name: str) -> object:
        for source in sources:
            value = getattr(importlib.import_module(source), name, _MISSING)
            if value is not _MISSING:
                setattr(module, name, value)
                return value
        raise AttributeError(f"module {fullname!r} has no attribute {name!r} (looked in {sources})")

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    return module


_MISSING = object()


class _AliasLoader(importlib.abc.Loader):
    """Hands back an already imported accel module for an ``accelerate.*`` name."""

    def __init__(self, module: ModuleType) -> None:
        self._module = module
        self._spec = getattr(module, "__spec__", None)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return self._module

    def exec_module(self, module: ModuleType) -> None:
        # The import system stamps the alias's spec on the module: give accel's back, so its
        # own relative and lazy imports keep resolving under ``accel``.
        if self._spec is not None:
            module.__spec__ = self._spec


class AccelerateToAccel(importlib.abc.MetaPathFinder):
    """Finds ``accelerate`` and its submodules in accel (helpers in the reference's source)."""

    def __init__(self, reference_src: str) -> None:
        self._reference_src = reference_src

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != _PREFIX and not fullname.startswith(_PREFIX + "."):
            return None
        if fullname == _HELPERS or fullname.startswith(_HELPERS + "."):
            parent, _, _ = fullname.rpartition(".")
            if parent == _PREFIX:
                search = [os.path.join(self._reference_src, "accelerate")]
            else:
                search = list(sys.modules[parent].__path__)
            return importlib.machinery.PathFinder.find_spec(fullname, search)
        if fullname in _COMPOSED:
            composed = _composed_module(fullname, _COMPOSED[fullname])
            return importlib.util.spec_from_loader(fullname, _AliasLoader(composed))
        if fullname == _PREFIX:
            # As under install_as_accelerate(): accel logs under the reference's logger names,
            # which the suite's tests listen to.
            importlib.import_module("accel._reexports._logger_names").route_to_reference_names()
        target_name = "accel" + fullname[len(_PREFIX) :]
        try:
            module = importlib.import_module(target_name)
        except ModuleNotFoundError as error:
            if error.name != target_name:
                raise
            return None
        is_package = hasattr(module, "__path__")
        return importlib.util.spec_from_loader(
            fullname, _AliasLoader(module), is_package=is_package
        )


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once), reading ``ACCEL_REFERENCE_SRC``."""
    reference_src = os.environ.get("ACCEL_REFERENCE_SRC")
    if not reference_src:
        return
    if any(isinstance(finder, AccelerateToAccel) for finder in sys.meta_path):
        return
    for name in [name for name in sys.modules if name == _PREFIX or name.startswith(_PREFIX + ".")]:
        del sys.modules[name]
    sys.meta_path.insert(0, AccelerateToAccel(reference_src))
