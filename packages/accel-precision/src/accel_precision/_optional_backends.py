"""Optional backends: import them on demand, or fail with the command that installs them."""

from __future__ import annotations

import importlib
from types import ModuleType

BNB_INSTALL = 'pip install "accel-precision[bnb]"'
TORCHAO_INSTALL = 'pip install "accel-precision[torchao]"'
TE_INSTALL = 'pip install "transformer-engine[pytorch]" (it builds against CUDA)'
MSAMP_INSTALL = (
    "install MS-AMP from source (it is not on PyPI and needs CUDA): "
    "https://azure.github.io/MS-AMP/docs/getting-started/installation"
)


def _require(module: str, feature: str, install: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f"{feature} needs the {module.split('.')[0]!r} package, which is not importable here "
            f"({error}). To use it, {install}."
        ) from error


def require_bnb(feature: str = "bitsandbytes quantization") -> ModuleType:
    """Import ``bitsandbytes`` or raise ImportError naming ``pip install "accel-precision[bnb]"``."""
    return _require("bitsandbytes", feature, f"run: {BNB_INSTALL}")


def require_torchao(feature: str = "FP8 training with the torchao backend") -> ModuleType:
    """Import ``torchao.float8`` or raise ImportError naming the install command."""
    return _require("torchao.float8", feature, f"run: {TORCHAO_INSTALL}")


def require_transformer_engine(
    feature: str = "FP8 training with the Transformer Engine backend",
) -> ModuleType:
    """Import ``transformer_engine.pytorch`` or raise ImportError naming the install command."""
    return _require("transformer_engine.pytorch", feature, f"run: {TE_INSTALL}")


def require_msamp(feature: str = "FP8 training with the MS-AMP backend") -> ModuleType:
    """Import ``msamp`` or raise ImportError saying how to install it."""
    return _require("msamp", feature, MSAMP_INSTALL)


def importable(module: str) -> bool:
    """Whether ``module`` imports (a real import: a broken install counts as absent)."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True
