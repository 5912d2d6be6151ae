"""The reference's operation helpers: verify_operation / chained_operation decorators,
gather_tensor_shape and the dtype codes, on one process and on 2 gloo processes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from accel_state.testing import reset_state, run_distributed

import accel_collectives as ac
from accel_collectives import DistributedOperationException

SCRIPTS = Path(__file__).parent / "scripts"


@pytest.fixture(autouse=True)
def fresh_state():
    reset_state()
    yield
    reset_state()


def test_dtype_codes_round_trip() -> None:
    assert len(set(ac.TENSOR_TYPE_TO_INT.values())) == len(ac.TENSOR_TYPE_TO_INT)
    assert 0 not in ac.TENSOR_INT_TO_DTYPE
    for dtype, code in ac.TENSOR_TYPE_TO_INT.items():
        assert ac.TENSOR_INT_TO_DTYPE[code] is dtype


def test_decorators_run_the_function_on_one_process() -> None:
    @ac.verify_operation
    def double(tensor: torch.Tensor) -> torch.Tensor:
        return tensor * 2

    @ac.chained_operation
    def fails() -> None:
        raise DistributedOperationException("inner")

    assert torch.equal(double(torch.ones(2)), torch.full((2,), 2.0))
    assert double.__name__ == "double"
    with pytest.raises(DistributedOperationException, match="fails") as info:
        fails()
    assert str(info.value.__cause__) == "inner"


def test_gather_tensor_shape_on_one_process() -> None:
    shape, code = ac.gather_tensor_shape(torch.zeros(2, 5, dtype=torch.int16))
    assert shape.tolist() == [2, 5] and ac.TENSOR_INT_TO_DTYPE[code] is torch.int16
    with pytest.raises(ValueError, match="passed None"):
        ac.gather_tensor_shape(None)
    with pytest.raises(ValueError, match="complex64"):
        ac.gather_tensor_shape(torch.zeros(2, dtype=torch.complex64))


def test_is_torch_xpu_tensor() -> None:
    assert ac.is_torch_xpu_tensor(torch.zeros(1)) is False
    assert ac.is_torch_xpu_tensor("not a tensor") is False
    assert ac.is_torch_xpu_tensor(torch.zeros(1, device="meta")) is False


@pytest.mark.multiprocess
def test_decorators_and_shapes_on_two_processes() -> None:
    result = run_distributed(
        SCRIPTS / "worker_decorators.py",
        num_processes=2,
        timeout=150,
        env={"ACCEL_DEBUG_MODE": "1"},
    )
    assert "RANK 0 OK" in result.stdout and "RANK 1 OK" in result.stdout, result.stdout
