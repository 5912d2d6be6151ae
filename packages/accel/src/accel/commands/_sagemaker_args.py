"""The reference's private ``accelerate.utils.launch._convert_nargs_to_dict``, which SageMaker
test suites call, on ``accel_launch.hyperparameters``."""

from __future__ import annotations

from typing import Any

from accel_launch import hyperparameters


def _convert_nargs_to_dict(nargs: list[str]) -> dict[str, Any]:
    """A training script's ``--name value`` arguments as typed SageMaker hyperparameters.

    Numbers become ``int`` (``3``) or ``float`` (``5e-5``), ``True``/``False`` become booleans,
    other values stay strings.

    Raises:
        accel_launch.ConfigError: (a ``ValueError``) for a flag without a value, which a
            SageMaker job cannot pass to the script.
    """
    return hyperparameters(nargs)
