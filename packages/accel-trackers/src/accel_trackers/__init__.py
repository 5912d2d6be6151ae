"""Experiment trackers (TensorBoard, W&B, Comet, DVCLive, MLflow, Aim, ClearML) behind one small interface. Depends on no other accel package."""

from importlib.metadata import version as _version

__version__ = _version("accel-trackers")

__all__ = ["__version__"]
