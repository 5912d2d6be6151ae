"""Experiment trackers (TensorBoard, W&B, Comet, DVCLive, MLflow, Aim, ClearML, SwanLab, Trackio) behind one small interface. Depends on no other accel package."""

from __future__ import annotations

from importlib import import_module as _import_module
from typing import Any

# Public name -> the private module that defines it, loaded on first use: the one list of
# this package's names (__all__ and the type stub beside this file are made from it).
_EXPORTS = {
    "AimTracker": "._aim",
    "ClearMLTracker": "._clearml",
    "CometMLTracker": "._comet",
    "DVCLiveTracker": "._dvclive",
    "MLflowTracker": "._mlflow",
    "LOGGER_TYPE_TO_CLASS": "._registry",
    "filter_trackers": "._registry",
    "get_available_trackers": "._registry",
    "get_tracker_class": "._registry",
    "is_tracker_available": "._registry",
    "register_tracker": "._registry",
    "register_tracker_class": "._registry",
    "TrackerSet": "._set",
    "init_trackers": "._set",
    "resolve_main_process": "._set",
    "SwanLabTracker": "._swanlab",
    "TensorBoardTracker": "._tensorboard",
    "GeneralTracker": "._tracker_interface",
    "LoggerType": "._tracker_interface",
    "NoOpTracker": "._tracker_interface",
    "TrackioTracker": "._trackio",
    "flatten": "._values",
    "WandBTracker": "._wandb",
}

# Read from the installed metadata on first access.
__version__: str

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        if name == "__version__":
            from importlib.metadata import version

            globals()[name] = version("accel-trackers")
            return globals()[name]
        raise AttributeError(_unknown(name))
    value = getattr(_import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS) | {"__version__"})


def _unknown(name: str) -> str:
    from difflib import get_close_matches

    close = get_close_matches(name, list(_EXPORTS), n=3)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return f"module 'accel_trackers' has no attribute {name!r}{hint}"
