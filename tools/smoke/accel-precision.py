"""Smoke run of accel-precision installed alone (no bitsandbytes, no torchao): bf16 autocast,
fp16 grad scaling and fp32 outputs on the CPU, and a clear refusal of an absent FP8 backend.

Run: ``python tools/smoke/accel-precision.py`` (prints ``ok: accel-precision`` on success).
"""

from __future__ import annotations

import importlib.util

import torch
from accel_precision import (
    autocast_context,
    autocast_dtype,
    convert_model_to_fp8_ao,
    convert_outputs_to_fp32,
    make_grad_scaler,
)


def main() -> None:
    assert autocast_dtype("bf16") is torch.bfloat16 and autocast_dtype("no") is None
    model = torch.nn.Linear(4, 2)
    x = torch.randn(3, 4)
    with autocast_context("bf16", "cpu"):
        assert model(x).dtype is torch.bfloat16
    with autocast_context("no", "cpu"):
        assert model(x).dtype is torch.float32

    forward = convert_outputs_to_fp32(model.forward)
    with autocast_context("bf16", "cpu"):
        assert forward(x).dtype is torch.float32

    scaler = make_grad_scaler("fp16", "cpu")
    assert isinstance(scaler, torch.amp.GradScaler), type(scaler)
    assert make_grad_scaler("bf16", "cpu") is None

    if importlib.util.find_spec("torchao") is None:
        try:
            convert_model_to_fp8_ao(torch.nn.Sequential(torch.nn.Linear(16, 16)))
        except ImportError as err:
            assert "torchao" in str(err), str(err)
        else:
            raise AssertionError("FP8 through torchao ran without torchao installed")
    print("ok: accel-precision")


if __name__ == "__main__":
    main()
