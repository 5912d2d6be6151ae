"""``accel.commands.config.config_args``: the config file classes of the reference's
``accelerate.commands.config.config_args`` that accel has, from ``accel_launch``.

``BaseConfig`` holds the settings every config file has, ``ClusterConfig`` those of a launch
on local machines (accel's ``LaunchConfig`` with the reference's ``enable_cpu_affinity``);
``SageMakerConfig`` is the settings of an Amazon SageMaker launch (the file ``accel config``
writes with ``compute_environment: AMAZON_SAGEMAKER``); ``load_config_from_file`` and
``default_config_file`` are those of [`accel.commands.config`][accel.commands.config].
"""

from __future__ import annotations

from accel_launch import BaseConfig, ClusterConfig, SageMakerConfig

from . import default_config_file, load_config_from_file

__all__ = [
    "BaseConfig",
    "ClusterConfig",
    "SageMakerConfig",
    "default_config_file",
    "load_config_from_file",
]
