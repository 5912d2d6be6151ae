"""Experiment trackers (TensorBoard, W&B, Comet, DVCLive, MLflow, Aim, ClearML, SwanLab, Trackio) behind one small interface. Depends on no other accel package."""

from importlib.metadata import version as _version

from ._aim import AimTracker
from ._clearml import ClearMLTracker
from ._comet import CometMLTracker
from ._dvclive import DVCLiveTracker
from ._mlflow import MLflowTracker
from ._registry import (
    LOGGER_TYPE_TO_CLASS,
    filter_trackers,
    get_available_trackers,
    get_tracker_class,
    is_tracker_available,
    register_tracker,
    register_tracker_class,
)
from ._set import TrackerSet, init_trackers, resolve_main_process
from ._swanlab import SwanLabTracker
from ._tensorboard import TensorBoardTracker
from ._tracker_interface import GeneralTracker, LoggerType, NoOpTracker
from ._trackio import TrackioTracker
from ._values import flatten
from ._wandb import WandBTracker

__version__ = _version("accel-trackers")

__all__ = [
    "LOGGER_TYPE_TO_CLASS",
    "AimTracker",
    "ClearMLTracker",
    "CometMLTracker",
    "DVCLiveTracker",
    "GeneralTracker",
    "LoggerType",
    "MLflowTracker",
    "NoOpTracker",
    "SwanLabTracker",
    "TensorBoardTracker",
    "TrackerSet",
    "TrackioTracker",
    "WandBTracker",
    "__version__",
    "filter_trackers",
    "flatten",
    "get_available_trackers",
    "get_tracker_class",
    "init_trackers",
    "is_tracker_available",
    "register_tracker",
    "resolve_main_process",
]
