"""Which trackers exist, which are installed, and what `log_with` asks for."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable
from typing import Union

from ._tracker_interface import GeneralTracker, LoggerType, install_command, logger
from .backends._aim import AimTracker
from .backends._clearml import ClearMLTracker
from .backends._comet import CometMLTracker
from .backends._dvclive import DVCLiveTracker
from .backends._mlflow import MLflowTracker
from .backends._swanlab import SwanLabTracker
from .backends._tensorboard import TensorBoardTracker
from .backends._trackio import TrackioTracker
from .backends._wandb import WandBTracker

__all__ = [
    "LOGGER_TYPE_TO_CLASS",
    "LogWith",
    "filter_trackers",
    "get_available_trackers",
    "get_tracker_class",
    "is_tracker_available",
    "register_tracker",
    "register_tracker_class",
]

LogWith = Union[str, LoggerType, GeneralTracker]

LOGGER_TYPE_TO_CLASS: dict[str, type[GeneralTracker]] = {
    "tensorboard": TensorBoardTracker,
    "wandb": WandBTracker,
    "comet_ml": CometMLTracker,
    "dvclive": DVCLiveTracker,
    "mlflow": MLflowTracker,
    "aim": AimTracker,
    "clearml": ClearMLTracker,
    "swanlab": SwanLabTracker,
    "trackio": TrackioTracker,
}
_BUILTIN = frozenset(LOGGER_TYPE_TO_CLASS)


def register_tracker(name: str, cls: type[GeneralTracker], *, overwrite: bool = False) -> None:
    """Make a third-party tracker usable by name in `log_with` / `init_trackers`.

    The class is built as `cls(project_name, logging_dir, **init_kwargs)` when its
    `requires_logging_directory` is True, else `cls(project_name, **init_kwargs)` (plus
    `logging_dir=` when its constructor accepts that keyword).

    Args:
        name: The name users pass in `log_with` (lower case, not "all").
        cls: A subclass of `GeneralTracker`.
        overwrite: Replace an existing registration of `name`.

    Raises:
        TypeError: If `cls` is not a `GeneralTracker` subclass.
        ValueError: If `name` is empty, "all", or already registered without `overwrite`.
    """
    if not (isinstance(cls, type) and issubclass(cls, GeneralTracker)):
        raise TypeError(
            f"register_tracker needs a subclass of GeneralTracker; got {cls!r}. "
            "Derive your tracker from accel_trackers.GeneralTracker."
        )
    if not isinstance(name, str) or not name or name.lower() == "all":
        raise ValueError(
            f"A tracker name must be a non-empty string other than 'all'; got {name!r}."
        )
    key = name.lower()
    if key in LOGGER_TYPE_TO_CLASS and not overwrite:
        raise ValueError(
            f"A tracker named {key!r} is already registered ({LOGGER_TYPE_TO_CLASS[key].__name__}). "
            "Pick another name or pass overwrite=True."
        )
    LOGGER_TYPE_TO_CLASS[key] = cls


def register_tracker_class(tracker_class: type[GeneralTracker]) -> None:
    """Make a `GeneralTracker` subclass usable by its `name` in `log_with`.

    The reference library's form of `register_tracker`: the name comes from the class, and
    registering a name again replaces the earlier class with a warning. Register before
    creating the Accelerator (or calling `init_trackers`) that uses it.

    Args:
        tracker_class: A subclass of `GeneralTracker` with a non-empty `name` and a
            `requires_logging_directory` class attribute.

    Raises:
        ValueError: If `tracker_class` is not a `GeneralTracker` subclass, has no name, its
            name is "all", or it does not set `requires_logging_directory`.
    """
    if not (isinstance(tracker_class, type) and issubclass(tracker_class, GeneralTracker)):
        raise ValueError(
            f"register_tracker_class needs a subclass of GeneralTracker; got {tracker_class!r}. "
            "Derive your tracker from accel.tracking.GeneralTracker."
        )
    name = getattr(tracker_class, "name", "")
    if not isinstance(name, str) or not name or name.lower() == "all":
        raise ValueError(
            f"A tracker class must set a class attribute `name` (a non-empty string other than "
            f"'all'); {tracker_class.__name__}.name is {name!r}. Add e.g. name = 'my_tracker'."
        )
    # GeneralTracker's default would silently build a tracker that needs a directory without
    # one, so the class itself (or a base of its own) must say which it is.
    if not any(
        "requires_logging_directory" in vars(base)
        for base in tracker_class.__mro__
        if base is not GeneralTracker
    ):
        raise ValueError(
            f"A tracker class must set the class attribute `requires_logging_directory`; "
            f"{tracker_class.__name__} does not. Add requires_logging_directory = True if it "
            "needs a logging directory, or False otherwise."
        )
    key = name.lower()
    if key in LOGGER_TYPE_TO_CLASS:
        warnings.warn(
            f"A tracker named {key!r} is already registered "
            f"({LOGGER_TYPE_TO_CLASS[key].__name__}); {tracker_class.__name__} replaces it.",
            stacklevel=2,
        )
    LOGGER_TYPE_TO_CLASS[key] = tracker_class


def _extra_of(key: str) -> str:
    """Name of the accel-trackers extra that installs the backend of tracker `key`."""
    return getattr(LOGGER_TYPE_TO_CLASS[key], "_extra", "") or key


def _key(name: str | LoggerType) -> str:
    return str(name.value if isinstance(name, LoggerType) else name).lower()


def get_tracker_class(name: str | LoggerType) -> type[GeneralTracker]:
    """The tracker class registered under `name`.

    Raises:
        ValueError: If no tracker has that name.
    """
    key = _key(name)
    try:
        return LOGGER_TYPE_TO_CLASS[key]
    except KeyError:
        raise ValueError(
            f"Unknown tracker {name!r}; known trackers are {sorted(LOGGER_TYPE_TO_CLASS)} and "
            "'all'. Check the spelling, or register yours with register_tracker(name, cls)."
        ) from None


def is_tracker_available(name: str | LoggerType) -> bool:
    """Whether the backend package of tracker `name` is installed (nothing is imported)."""
    cls = get_tracker_class(name)
    check = getattr(cls, "is_available", None)
    return bool(check()) if callable(check) else True


def get_available_trackers() -> list[str]:
    """Names of the registered trackers whose backend is installed, in registration order."""
    return [name for name in LOGGER_TYPE_TO_CLASS if is_tracker_available(name)]


def _as_list(log_with: LogWith | Iterable[LogWith] | None) -> list[LogWith]:
    if log_with is None:
        return []
    if isinstance(log_with, (str, LoggerType, GeneralTracker)):
        return [log_with]
    if not isinstance(log_with, Iterable):
        raise TypeError(
            f"log_with must be a tracker name, 'all', a GeneralTracker, or a list of them; got "
            f"{type(log_with).__name__} ({log_with!r}). Pass e.g. log_with='tensorboard' or "
            "log_with=['wandb', my_tracker]."
        )
    return list(log_with)


def filter_trackers(
    log_with: LogWith | Iterable[LogWith] | None,
    logging_dir: str | os.PathLike[str] | None = None,
) -> list[LoggerType | str | GeneralTracker]:
    """Resolve `log_with` into the trackers to use.

    "all" means every registered tracker whose backend is installed; when `logging_dir` is
    None it leaves out (with a warning) those that need a directory. A tracker named
    explicitly must be installed. Tracker instances are kept as they are.

    Args:
        log_with: A name, a `LoggerType`, a `GeneralTracker`, or a list of them.
        logging_dir: The logging directory that will be given to the trackers.

    Returns:
        `LoggerType` members for built-in trackers, names for registered third-party
        ones, and the instances given, without duplicates.

    Raises:
        ValueError: For an unknown name, or a tracker that needs a logging directory
            when `logging_dir` is None.
        ImportError: For a tracker named explicitly whose package is not installed; the
            message gives the install command.
        TypeError: For an entry that is neither a name nor a `GeneralTracker` instance.
    """
    items = _as_list(log_with)
    names: list[str] = []
    instances: list[GeneralTracker] = []
    explicit: set[str] = set()
    for item in items:
        if isinstance(item, GeneralTracker):
            instances.append(item)
            continue
        if isinstance(item, type) and issubclass(item, GeneralTracker):
            raise TypeError(
                f"log_with takes tracker names or tracker instances; got the class "
                f"{item.__name__}. Pass an instance, e.g. {item.__name__}(...), or register "
                "the class with register_tracker(name, cls) and pass its name."
            )
        if not isinstance(item, (str, LoggerType)):
            raise TypeError(
                f"log_with entries must be str, LoggerType or GeneralTracker; got "
                f"{type(item).__name__} ({item!r})."
            )
        key = _key(item)
        if key == "all":
            names.extend(n for n in get_available_trackers() if n not in names)
            continue
        get_tracker_class(key)  # raises ValueError on unknown names
        explicit.add(key)
        if key not in names:
            names.append(key)
    needs_dir = [
        key
        for key in names
        if key not in explicit
        and logging_dir is None
        and LOGGER_TYPE_TO_CLASS[key].requires_logging_directory
    ]
    if needs_dir:
        logger.warning(
            "log_with='all' leaves out %s: they write to a directory and logging_dir is None. "
            "Pass project_dir=... (or logging_dir=...) to include them.",
            needs_dir,
        )
        names = [key for key in names if key not in needs_dir]
    for key in names:
        if key in explicit and not is_tracker_available(key):
            raise ImportError(
                f"log_with asks for {key!r}, but its backend package is not installed. "
                f"Install it with: {install_command(_extra_of(key))}"
            )
        if LOGGER_TYPE_TO_CLASS[key].requires_logging_directory and logging_dir is None:
            raise ValueError(
                f"Logging with `{key}` requires a `logging_dir`: the {key!r} tracker writes to "
                "a directory, but logging_dir is None. Pass logging_dir=... (or project_dir / "
                "ProjectConfiguration(logging_dir=...) to Accelerator)."
            )
    resolved: list[LoggerType | str | GeneralTracker] = [
        LoggerType(key) if key in _BUILTIN else key for key in names
    ]
    for instance in instances:
        if instance not in resolved:
            resolved.append(instance)
    return resolved
