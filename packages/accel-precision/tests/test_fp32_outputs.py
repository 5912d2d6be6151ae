"""ConvertOutputsToFp32 / convert_outputs_to_fp32, get_grad_scaler and
get_mixed_precision_context_manager."""

from __future__ import annotations

import pickle
from collections import namedtuple

import pytest
import torch
from accel_state import AcceleratorState, AutocastKwargs, DistributedType
from accel_state.testing import reset_state

from accel_precision import (
    ConvertOutputsToFp32,
    convert_outputs_to_fp32,
    get_grad_scaler,
    get_mixed_precision_context_manager,
)

Pair = namedtuple("Pair", "a b")


def half_outputs(x: torch.Tensor) -> dict:
    """Outputs of every kind, in half precision."""
    return {
        "logits": x.half(),
        "nested": [x.bfloat16(), (x.half(), x.int())],
        "pair": Pair(x.half(), "label"),
    }


def test_convert_outputs_to_fp32_converts_nested_half_tensors() -> None:
    forward = convert_outputs_to_fp32(half_outputs)
    out = forward(torch.ones(2))
    assert out["logits"].dtype == torch.float32
    assert out["nested"][0].dtype == torch.float32
    assert out["nested"][1][0].dtype == torch.float32
    assert out["nested"][1][1].dtype == torch.int32  # integers untouched
    assert isinstance(out["pair"], Pair) and out["pair"].a.dtype == torch.float32
    assert out["pair"].b == "label"
    assert forward.__name__ == "half_outputs"
    assert isinstance(forward.__wrapped__, ConvertOutputsToFp32)
    assert forward.__wrapped__.model_forward is half_outputs


def test_convert_outputs_to_fp32_wraps_a_model_forward() -> None:
    model = torch.nn.Linear(3, 2).half()
    model.forward = convert_outputs_to_fp32(model.forward)
    assert model(torch.ones(1, 3).half()).dtype == torch.float32


def test_wrapped_forward_refuses_to_be_pickled() -> None:
    with pytest.raises(pickle.PicklingError, match="unwrap_model"):
        pickle.dumps(ConvertOutputsToFp32(half_outputs))


def test_get_grad_scaler_scales_and_steps() -> None:
    scaler = get_grad_scaler(init_scale=8.0)
    assert isinstance(scaler, torch.amp.GradScaler)
    assert scaler.get_scale() == 8.0  # a working scaler here: CPU when no accelerator
    param = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([param], lr=0.5)
    scaler.scale(param.sum()).backward()
    assert torch.equal(param.grad, torch.full((2,), 8.0))
    scaler.step(optimizer)
    scaler.update()
    assert torch.equal(param.detach(), torch.full((2,), 0.5))


def test_get_grad_scaler_for_fsdp_is_sharded() -> None:
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

    scaler = get_grad_scaler(DistributedType.FSDP, init_scale=4.0)
    assert isinstance(scaler, ShardedGradScaler) and scaler.get_scale() == 4.0


@pytest.fixture
def state():
    reset_state()
    yield
    reset_state()


@pytest.mark.parametrize(
    ("precision", "dtype"),
    [("bf16", torch.bfloat16), ("fp16", torch.float16), ("fp8", torch.bfloat16)],
)
def test_mixed_precision_context_manager_autocasts(state, precision, dtype) -> None:
    AcceleratorState(mixed_precision=precision, cpu=True)
    layer = torch.nn.Linear(4, 4)
    with get_mixed_precision_context_manager(native_amp=True):
        assert layer(torch.ones(1, 4)).dtype == dtype
    with get_mixed_precision_context_manager(native_amp=False):
        assert layer(torch.ones(1, 4)).dtype == torch.float32
    disabled = AutocastKwargs(enabled=False)
    with get_mixed_precision_context_manager(native_amp=True, autocast_kwargs=disabled):
        assert layer(torch.ones(1, 4)).dtype == torch.float32
