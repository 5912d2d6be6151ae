"""Where torch_xla is missing, TPU / XLA runs are refused with the way to get it; the runs
themselves are tested in tests/xla (tools/xla_env.py)."""

from __future__ import annotations

import importlib.util

import pytest

from accel_state import (
    USE_TORCH_XLA,
    is_torch_xla_available,
    patch_environment,
    torch_xla_module,
    unsupported_distributed_type,
)

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch_xla") is not None,
    reason="torch_xla is installed here: tests/xla runs it instead",
)


def test_xla_is_refused_with_the_install_and_the_script() -> None:
    assert USE_TORCH_XLA is True  # the default, as in the reference
    assert is_torch_xla_available() is False
    for kind in ("XLA", "TPU", "xla"):
        message = unsupported_distributed_type(kind, "--tpu")
        assert message is not None
        assert message.startswith("TPU / XLA runs need torch_xla, but torch_xla is not installed")
        assert "got --tpu." in message and "tools/xla_env.py" in message
    with pytest.raises(RuntimeError, match=r"torch_xla.distributed.parallel_loader.*pip install"):
        torch_xla_module("distributed.parallel_loader")
    with pytest.raises(ValueError, match="one device kind at a time"):
        is_torch_xla_available(check_is_tpu=True, check_is_gpu=True)


def test_use_torch_xla_switch_is_read_when_asked() -> None:
    with patch_environment(USE_TORCH_XLA="0"):
        assert is_torch_xla_available() is False
    with patch_environment(USE_TORCH_XLA="maybe"), pytest.raises(ValueError, match="USE_TORCH_XLA"):
        is_torch_xla_available()
