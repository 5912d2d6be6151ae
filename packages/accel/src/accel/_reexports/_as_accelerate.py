"""``install_as_accelerate()``: code that imports ``accelerate`` runs on accel, unchanged.

After the switch, ``import accelerate`` gives a module that forwards every name to ``accel`` and
reports [`ACCELERATE_API_VERSION`][accel.ACCELERATE_API_VERSION] as its ``__version__``; ``accelerate.<path>`` is accel's
module at the same path (``accelerate.utils.modeling`` is ``accel.utils.modeling``). The
metadata of an ``accelerate`` distribution at that version is served too, so libraries that gate
on ``importlib.metadata.version("accelerate")`` (transformers, diffusers) accept accel. Nothing of
this exists until the switch is called.

The pattern is PyMySQL's ``install_as_MySQLdb()``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import threading
import types
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from ._logger_names import route_to_reference_names

ACCELERATE_API_VERSION = "1.15.0"
"""The reference library's release whose API accel implements: what ``accelerate.__version__``
and ``importlib.metadata.version("accelerate")`` report under ``install_as_accelerate()``.
``accel.__version__`` stays accel's own release."""

_REFERENCE = "accelerate"
_OURS = "accel"
_lock = threading.Lock()


class AccelerateShadowedWarning(UserWarning):
    """The reference ``accelerate`` is installed, and ``install_as_accelerate()`` makes accel
    answer its imports instead (said once per process)."""


class AccelerateAlreadyImportedError(ImportError):
    """``install_as_accelerate()`` was called after the reference ``accelerate`` was imported:
    two libraries would then share one name, so the switch refuses."""


def _counterpart(fullname: str) -> str:
    """``accelerate.utils.modeling`` -> ``accel.utils.modeling``."""
    return _OURS + fullname[len(_REFERENCE) :]


class _AliasLoader(importlib.abc.InspectLoader):
    """Loads ``accelerate.<path>`` as accel's module at that path (the same object).

    accel's module is imported when the alias is loaded, not when it is found, so
    ``python -m accelerate.commands.launch`` runs accel's module once, as ``__main__``: runpy
    finds the alias, then runs the code this loader gives (accel's) without importing it.
    """

    def __init__(self, real: importlib.machinery.ModuleSpec) -> None:
        self._real = real
        self._own_spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = importlib.import_module(self._real.name)
        self._own_spec = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        # The import system stamped the alias's spec on the module: give it its own back, so
        # accel's module keeps its name for its relative imports, reload and pickling.
        module.__spec__ = self._own_spec

    def _real_loader(self) -> importlib.abc.InspectLoader:
        loader = self._real.loader
        if not isinstance(loader, importlib.abc.InspectLoader):
            raise ImportError(
                f"accel's module {self._real.name!r} has no code to run (its loader is "
                f"{loader!r}); import it instead of running it with python -m.",
                name=self._real.name,
            )
        return loader

    def get_code(self, fullname: str) -> types.CodeType | None:
        """The code of accel's module (what ``python -m accelerate.<path>`` runs)."""
        return self._real_loader().get_code(self._real.name)

    def get_source(self, fullname: str) -> str | None:
        """The source of accel's module."""
        return self._real_loader().get_source(self._real.name)

    def is_package(self, fullname: str) -> bool:
        """Whether accel's module is a package."""
        return self._real.submodule_search_locations is not None


class _TopLevelLoader(importlib.abc.Loader):
    """Creates the ``accelerate`` module: accel's names, the reference's API version."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        import accel

        module = types.ModuleType(_REFERENCE, accel.__doc__)

        def __getattr__(name: str) -> Any:
            return getattr(accel, name)

        def __dir__() -> list[str]:
            return dir(accel)

        module.__dict__.update(
            __getattr__=__getattr__,
            __dir__=__dir__,
            __version__=ACCELERATE_API_VERSION,
            __all__=list(accel.__all__),
            __file__=accel.__file__,
            __path__=list(accel.__path__),
            __accel__=True,
        )
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class AccelerateFinder(importlib.abc.MetaPathFinder):
    """Answers ``accelerate`` and ``accelerate.<path>`` imports with accel's modules, and the
    ``accelerate`` distribution's metadata with [`ACCELERATE_API_VERSION`][accel.ACCELERATE_API_VERSION]."""

    accel_as_accelerate = True

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == _REFERENCE:
            import accel

            return importlib.machinery.ModuleSpec(
                fullname, _TopLevelLoader(), origin=accel.__file__, is_package=True
            )
        if not fullname.startswith(_REFERENCE + "."):
            return None
        ours = _counterpart(fullname)
        try:
            real = importlib.util.find_spec(ours)
        except ModuleNotFoundError as err:
            if err.name is not None and ours.startswith(err.name + "."):
                real = None  # a parent is missing: the module is missing
            else:
                raise  # a dependency of accel's package is missing: say that, not this
        if real is None:
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: under install_as_accelerate(), accelerate.<path> "
                f"is accel's module at the same path, and accel has no {ours!r}. The modules "
                "accel provides and the names it does not are listed in the migration guide "
                "(docs/migration/unsupported.md); import the name from the module that has it.",
                name=fullname,
            ) from None
        return importlib.machinery.ModuleSpec(
            fullname,
            _AliasLoader(real),
            origin=real.origin,
            is_package=real.submodule_search_locations is not None,
        )

    def find_distributions(self, context: Any = None) -> Iterator[Any]:
        """The ``accelerate`` distribution's metadata, for ``importlib.metadata`` lookups by
        that name (only while the switch is on: this finder is not on ``sys.meta_path``
        otherwise)."""
        name = getattr(context, "name", None)
        if name is None or name.lower().replace("_", "-") != _REFERENCE:
            return iter(())
        return iter((_distribution(),))


def _distribution() -> Any:
    """An ``importlib.metadata.Distribution`` named ``accelerate`` at the API version."""
    from importlib.metadata import Distribution

    metadata = (
        "Metadata-Version: 2.1\n"
        f"Name: {_REFERENCE}\n"
        f"Version: {ACCELERATE_API_VERSION}\n"
        "Summary: accel, installed as accelerate (accel.install_as_accelerate())\n"
    )

    class _AccelAsAccelerate(Distribution):
        def read_text(self, filename: str) -> str | None:
            return metadata if filename in ("METADATA", "PKG-INFO") else None

        def locate_file(self, path: Any) -> Any:
            import accel

            return os.path.join(os.path.dirname(accel.__file__ or ""), str(path))

    return _AccelAsAccelerate()


def _finder() -> AccelerateFinder | None:
    for finder in sys.meta_path:
        if getattr(finder, "accel_as_accelerate", False):
            return finder  # type: ignore[return-value]
    return None


def is_installed_as_accelerate() -> bool:
    """Whether ``install_as_accelerate()`` is in effect in this process."""
    return _finder() is not None


def _imported_reference() -> types.ModuleType | None:
    """The reference ``accelerate`` if it is imported (not accel under its name)."""
    module = sys.modules.get(_REFERENCE)
    if module is None or getattr(module, "__accel__", False):
        return None
    return module


def install_as_accelerate() -> None:
    """Make ``import accelerate`` and every ``accelerate.<path>`` resolve to accel.

    Call it before anything imports ``accelerate`` (first thing in the script), or set
    ``ACCEL_AS_ACCELERATE=1`` (or run under ``accel launch --as_accelerate``) to have it done at
    interpreter start with no code change. Calling it again does nothing.

    Under the switch, ``accelerate.__version__`` and ``importlib.metadata.version("accelerate")``
    report [`ACCELERATE_API_VERSION`][accel.ACCELERATE_API_VERSION], so the version gates of
    transformers, PEFT, TRL and diffusers accept accel; ``accel.__version__`` is unchanged.
    accel's warnings and messages are logged under the reference's logger names
    (``accelerate.utils.modeling`` ...), so levels and handlers set on those names apply.

    Raises:
        AccelerateAlreadyImportedError: The reference ``accelerate`` is imported already, so
            objects of both libraries would mix in one process.

    Warns:
        AccelerateShadowedWarning: Once, when the reference ``accelerate`` is installed (but not
            imported): accel answers its imports from now on.

    Example:
        >>> import accel
        >>> accel.install_as_accelerate()
        >>> import accelerate
        >>> accelerate.Accelerator is accel.Accelerator
        True
    """
    with _lock:
        if _finder() is not None:
            return
        reference = _imported_reference()
        if reference is not None:
            where = getattr(reference, "__file__", None) or "an unknown location"
            raise AccelerateAlreadyImportedError(
                "accel.install_as_accelerate() must run before anything imports the reference "
                f"'accelerate'; it is imported already (from {where}), so objects of both "
                "libraries would mix. Call accel.install_as_accelerate() first thing in the "
                "script, before importing transformers, peft, trl or diffusers, or set "
                "ACCEL_AS_ACCELERATE=1 (accel launch --as_accelerate) so it runs at interpreter "
                "start."
            )
        installed = importlib.machinery.PathFinder.find_spec(_REFERENCE)
        sys.meta_path.insert(0, AccelerateFinder())
        importlib.invalidate_caches()
        route_to_reference_names()
    if installed is not None and installed.origin:
        warnings.warn(
            f"The reference 'accelerate' is installed ({installed.origin}), and "
            "accel.install_as_accelerate() is on: accel answers every 'accelerate' import in "
            "this process. Silence this with warnings.filterwarnings('ignore', "
            "category=accel.AccelerateShadowedWarning).",
            AccelerateShadowedWarning,
            stacklevel=2,
        )
