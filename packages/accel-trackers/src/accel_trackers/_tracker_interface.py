"""The tracker interface, the backend names and the no-op stand-in used on other ranks."""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
from enum import Enum
from types import ModuleType
from typing import Any

from ._values import normalize, warn_once

__all__ = [
    "BackendTracker",
    "GeneralTracker",
    "LoggerType",
    "NoOpTracker",
    "install_command",
    "require_backend",
]

logger = logging.getLogger("accel_trackers")


class LoggerType(str, Enum):
    """The experiment trackers known out of the box.

    `ALL` selects every backend whose package is installed.
    """

    ALL = "all"
    TENSORBOARD = "tensorboard"
    WANDB = "wandb"
    COMETML = "comet_ml"
    DVCLIVE = "dvclive"
    MLFLOW = "mlflow"
    AIM = "aim"
    CLEARML = "clearml"
    SWANLAB = "swanlab"
    TRACKIO = "trackio"

    def __str__(self) -> str:
        return self.value


def install_command(extra: str) -> str:
    """The pip command that installs the backend of extra `extra`."""
    return f'pip install "accel-trackers[{extra}]"'


def require_backend(module: str, extra: str, tracker: str) -> ModuleType:
    """Import a backend package, or say exactly how to install it.

    Args:
        module: Import name of the backend package (e.g. "wandb").
        extra: Name of the accel-trackers extra that installs it.
        tracker: Name of the tracker asking, used in the message.

    Returns:
        The imported module.

    Raises:
        ImportError: If the package is not installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"The {tracker!r} tracker needs the Python package {module!r}, which is not "
            f"installed in this environment. Install it with: {install_command(extra)}"
        ) from err


class _NoOp:
    """An object on which every attribute access and every call does nothing."""

    def __getattr__(self, name: str) -> _NoOp:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> _NoOp:
        return self

    def __bool__(self) -> bool:
        return False

    def __iter__(self):
        return iter(())

    def __enter__(self) -> _NoOp:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def __repr__(self) -> str:
        return "<no-op tracker object>"


_NOOP = _NoOp()


class GeneralTracker:
    """Base class of every experiment tracker.

    A subclass sets the class attributes `name` and `requires_logging_directory`, creates
    its backend run in `start()` (not in `__init__`, so that constructing a tracker on a
    non-main process costs nothing), and implements `store_init_configuration`, `log`,
    `finish` and the `tracker` property. `log_images` and `log_table` exist where the
    backend has them.

    Attributes:
        name: The name used in `log_with` and `get_tracker`.
        requires_logging_directory: Whether the constructor needs a logging directory.
        takes_logging_dir: Whether the constructor accepts an optional `logging_dir`
            keyword among its `**kwargs` (`init_trackers` then passes its directory).
        main_process_only: When True (the default) only the main process talks to the
            backend; other processes get a no-op stand-in.
    """

    name: str = ""
    requires_logging_directory: bool = False
    takes_logging_dir: bool = False
    main_process_only: bool = True

    def __init__(self, _blank: bool = False) -> None:
        self._blank = _blank

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes that do not exist: a blank tracker swallows them.
        if name.startswith("__") or name == "_blank" or not self.__dict__.get("_blank", False):
            raise AttributeError(f"{type(self).__name__!s} object has no attribute {name!r}")
        return _NOOP

    @property
    def tracker(self) -> Any:
        """The backend's native object (run, writer, experiment ...)."""
        return _NOOP if self.__dict__.get("_blank", False) else None

    def start(self) -> None:
        """Create the backend run. Called once, on the processes that log."""

    def store_init_configuration(self, values: dict[str, Any]) -> None:
        """Store the hyper-parameters of the run.

        Args:
            values: The configuration; nested dicts, tensors and None are accepted.
        """

    def log(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Log the values of one step.

        Args:
            values: Name -> value. Nested dicts are flattened with "/".
            step: The step number, or None to let the backend count.
            **kwargs: Passed to the backend's logging call.
        """

    def finish(self) -> None:
        """Close the run. Calling it again does nothing."""


class NoOpTracker(GeneralTracker):
    """What a process that must not log gets: every method and attribute is harmless.

    Args:
        name: The name of the tracker it stands in for.
    """

    def __init__(self, name: str = "") -> None:
        super().__init__(_blank=True)
        self.name = name

    def __repr__(self) -> str:
        return f"NoOpTracker(name={self.name!r})"


class BackendTracker(GeneralTracker):
    """Shared life cycle of the built-in adapters: lazy start, idempotent finish.

    Subclasses set `_module` and `_extra` and implement `_open()` and `_close()`.
    """

    _module: str = ""
    _extra: str = ""

    def __init__(self) -> None:
        super().__init__()
        self._run: Any = None
        self._started = False
        self._finished = False
        self._warned: set[str] = set()

    def _keep_options(self, kwargs: dict[str, Any]) -> str | None:
        """Store the backend's options as `init_kwargs` and return the `logging_dir` keyword
        taken out of them (adapters with `takes_logging_dir`), or None."""
        logging_dir = kwargs.pop("logging_dir", None)
        self.init_kwargs = kwargs
        return os.fspath(logging_dir) if logging_dir is not None else None

    def _options_with_dir(self, key: str) -> dict[str, Any]:
        """A copy of `init_kwargs` where the backend's directory option `key` is the logging
        directory (created), unless the caller gave `key` or there is no logging directory."""
        kwargs = dict(self.init_kwargs)
        logging_dir = getattr(self, "logging_dir", None)
        if logging_dir is not None and key not in kwargs:
            os.makedirs(logging_dir, exist_ok=True)
            kwargs[key] = logging_dir
        return kwargs

    def _log_all_but_none(self, values: dict[str, Any], step: int | None, **kwargs: Any) -> None:
        """`run.log` the flattened values, leaving out None values with one warning per key."""
        flat = normalize(values)
        skipped = [key for key, value in flat.items() if value is None]
        warn_once(self._warned, self.name, skipped, "None is not a value")
        clean = {key: value for key, value in flat.items() if value is not None}
        if clean:
            self._run.log(clean, step=step, **kwargs)

    @classmethod
    def is_available(cls) -> bool:
        """Whether the backend package can be imported here (checked without importing)."""
        return importlib.util.find_spec(cls._module) is not None

    def _backend(self) -> ModuleType:
        return require_backend(self._module, self._extra, self.name)

    def _open(self) -> Any:  # pragma: no cover - every adapter overrides it
        raise NotImplementedError

    def _close(self) -> None:  # pragma: no cover - every adapter overrides it
        raise NotImplementedError

    def start(self) -> None:
        """Create the backend run (once)."""
        if self._started:
            return
        self._run = self._open()
        self._started = True

    @property
    def tracker(self) -> Any:
        """The backend's native object; starts the run if needed."""
        if not self._started and not self._finished:
            self.start()
        return self._run

    def _active(self) -> bool:
        """Start on first use; False (with one warning) once the run is finished."""
        if self._finished:
            warn_once(self._warned, self.name, ["<call after finish>"], "the run is finished")
            return False
        if not self._started:
            self.start()
        return True

    def finish(self) -> None:
        """Close the run. A second call, or a backend that already closed it, is harmless."""
        if self._finished or not self._started:
            self._finished = True
            return
        self._finished = True
        try:
            self._close()
        except Exception as err:  # a backend that already ended its run must not break shutdown
            logger.warning("%s: closing the run raised %r; ignored", self.name, err)
