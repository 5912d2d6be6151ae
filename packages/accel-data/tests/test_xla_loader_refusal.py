"""Without torch_xla the XLA device loader refuses with the way to get it (tests/xla runs it)."""

from __future__ import annotations

import importlib.util

import pytest
import torch

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch_xla") is not None,
    reason="torch_xla is installed here: tests/xla runs it instead",
)


def test_mp_device_loader_wrapper_refuses_without_torch_xla() -> None:
    from accel_data import MpDeviceLoaderWrapper

    with pytest.raises(RuntimeError, match="torch_xla is not installed"):
        MpDeviceLoaderWrapper(torch.utils.data.DataLoader(range(4)), torch.device("cpu"))
