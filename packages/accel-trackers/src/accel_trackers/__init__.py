"""Experiment trackers (TensorBoard, W&B, Comet, DVCLive, MLflow, Aim, ClearML, SwanLab, Trackio) behind one small interface. Depends on no other accel package."""

from __future__ import annotations

from ._lazy import lazy_module as _lazy_module

# Public name -> the private module that defines it, loaded on first use: the one list of
# this package's names (__all__ and the type stub beside this file are made from it).
_EXPORTS = {
    "AimTracker": ".backends._aim",
    "ClearMLTracker": ".backends._clearml",
    "CometMLTracker": ".backends._comet",
    "DVCLiveTracker": ".backends._dvclive",
    "MLflowTracker": ".backends._mlflow",
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
    "SwanLabTracker": ".backends._swanlab",
    "TensorBoardTracker": ".backends._tensorboard",
    "GeneralTracker": "._tracker_interface",
    "LoggerType": "._tracker_interface",
    "NoOpTracker": "._tracker_interface",
    "TrackioTracker": ".backends._trackio",
    "flatten": "._values",
    "WandBTracker": ".backends._wandb",
}

# Read from the installed metadata on first access.
__version__: str

__all__ = ["__version__", *sorted(_EXPORTS)]

__getattr__, __dir__ = _lazy_module(globals(), _EXPORTS, distribution="accel-trackers")
