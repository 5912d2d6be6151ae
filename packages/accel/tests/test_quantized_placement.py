"""``prepare`` of a bitsandbytes 8-bit or 4-bit model (``is_loaded_in_8bit`` / ``_4bit`` with an
``hf_device_map``, as transformers leaves it) refuses placements where it cannot train, before
registering anything."""

from __future__ import annotations

import pytest
import torch
from accel_state import is_bitsandbytes_multi_backend_available, is_xpu_available

from accel import Accelerator


class _Quantized(torch.nn.Module):
    def __init__(self, flag: str, device_map: dict[str, object]) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(2, 2)
        setattr(self, flag, True)
        self.hf_device_map = device_map


@pytest.mark.parametrize("flag", ["is_loaded_in_8bit", "is_loaded_in_4bit"])
@pytest.mark.parametrize(
    ("device_map", "shown"),
    [({"": "disk"}, "['disk']"), ({"linear": 0, "other": "disk"}, "['0', 'disk']")],
)
def test_disk_offload_is_refused(flag, device_map, shown):
    accelerator = Accelerator(cpu=True)
    with pytest.raises(ValueError) as info:
        accelerator.prepare_model(_Quantized(flag, device_map))
    assert str(info.value) == (
        "An 8-bit or 4-bit model cannot train with CPU or disk offload; its hf_device_map uses "
        f"{shown}. Load it with every module on this process's accelerator "
        "(device_map={'': 'cpu'}), or with more accelerator memory."
    )
    assert accelerator._models == []


def test_cpu_is_refused_unless_bitsandbytes_runs_there():
    accelerator = Accelerator(cpu=True)
    model = _Quantized("is_loaded_in_8bit", {"": "cpu"})
    if is_bitsandbytes_multi_backend_available() and not is_xpu_available():
        assert accelerator.prepare_model(model) is model  # the multi-backend build runs on CPU
    else:
        with pytest.raises(ValueError, match="cannot train with CPU or disk offload"):
            accelerator.prepare_model(model)


def test_models_that_are_not_quantized_are_not_checked():
    model = torch.nn.Linear(2, 2)
    model.hf_device_map = {"": "cpu"}  # type: ignore[assignment]
    model.is_loaded_in_8bit = False  # type: ignore[assignment]
    assert Accelerator(cpu=True).prepare_model(model) is model
