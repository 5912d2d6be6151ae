"""The ``accel`` and ``accel-launch`` commands: config, launch, test, env."""

from importlib.metadata import version as _version

from ._config import (
    ConfigError,
    LaunchConfig,
    config_from_dict,
    default_config_file,
    load_config_file,
    write_basic_config,
)
from ._resolve import LaunchPlan, child_environment, resolve

__version__ = _version("accel-launch")

__all__ = [
    "ConfigError",
    "LaunchConfig",
    "LaunchPlan",
    "__version__",
    "child_environment",
    "config_from_dict",
    "default_config_file",
    "load_config_file",
    "resolve",
    "write_basic_config",
]
