"""``accel.commands.config``: the config file of ``accel launch``, under the reference's names.

``default_config_file`` is the path of the file ``accel config`` writes (a string, as in the
reference; ``ACCEL_CONFIG_HOME`` moves it), and ``load_config_from_file`` reads it.
"""

from __future__ import annotations

import os
import sys

from accel_launch import LaunchConfig, load_config_file
from accel_launch import default_config_file as _default_config_file
from accel_launch.cli import reference_main

__all__ = ["default_config_file", "load_config_from_file", "main"]

default_config_file: str = str(_default_config_file())
"""Where ``accel config`` writes the config file, read when this module was imported."""


def load_config_from_file(config_file: str | os.PathLike[str] | None) -> LaunchConfig:
    """Read an ``accel launch`` config file (YAML or JSON).

    Args:
        config_file: The file to read, or ``None`` for
            [`default_config_file`][accel.commands.config.default_config_file].

    Returns:
        The settings; ``.to_dict()`` gives them as the file's keys and values.

    Raises:
        FileNotFoundError: ``config_file`` does not exist.
        accel_launch.ConfigError: The file does not parse, or holds invalid settings.
    """
    path = default_config_file if config_file is None else os.fspath(config_file)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"config file {path!r} does not exist. Write one with `accel config` (or `accel "
            "config default`), or pass the path of an existing file."
        )
    return load_config_file(path)


def main() -> int:
    """The reference's ``accelerate-config`` console script: ``accel config`` with the words
    of ``sys.argv`` (``default``, ``update`` ...); returns its exit code."""
    return reference_main("accelerate-config")
