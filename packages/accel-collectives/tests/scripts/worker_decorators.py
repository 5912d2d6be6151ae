"""Run by every process of a 2-process gloo job with ACCEL_DEBUG_MODE=1: the public
verify_operation / chained_operation decorators and gather_tensor_shape.

Prints ``RANK <r> OK`` when every check of that process passed.
"""

from __future__ import annotations

import torch
from accel_state import PartialState

import accel_collectives as ac
from accel_collectives import DistributedOperationException

state = PartialState()
r = state.process_index
assert state.num_processes == 2 and state.debug


@ac.verify_operation
def total(tensor: torch.Tensor) -> torch.Tensor:
    return ac.reduce(tensor, "sum")


@ac.chained_operation
def train_step(tensor: torch.Tensor) -> torch.Tensor:
    return total(tensor) * 2


# Same shapes: the collective runs.
assert torch.equal(total(torch.ones(2, 3)), torch.full((2, 3), 2.0))
assert torch.equal(total(tensor=torch.ones(1)), torch.full((1,), 2.0))

# Mismatched shapes: every process raises, naming the function and both shapes.
try:
    total(torch.ones(2 + r, 3))
except DistributedOperationException as err:
    text = str(err)
    assert "total" in text, text
    assert "process 0: [2, 3] float32" in text and "process 1: [3, 3] float32" in text, text
else:
    raise AssertionError("mismatched shapes did not raise")

# chained_operation names the outer function and keeps the first error as the cause.
try:
    train_step(torch.ones(1 + r))
except DistributedOperationException as err:
    assert "train_step" in str(err), str(err)
    assert isinstance(err.__cause__, DistributedOperationException)
    assert "[1] float32" in str(err.__cause__) and "[2] float32" in str(err.__cause__)
else:
    raise AssertionError("chained_operation did not raise")

# gather_tensor_shape: process 1 holds a tensor (with a size 0 dim), process 0 passes None.
held = torch.zeros(4, 0, 7, dtype=torch.bfloat16) if r == 1 else None
shape, code = ac.gather_tensor_shape(held)
assert shape.tolist() == [4, 0, 7], shape
assert ac.TENSOR_INT_TO_DTYPE[code] is torch.bfloat16
try:
    ac.gather_tensor_shape(torch.ones(1))
except ValueError as err:
    assert "exactly one process" in str(err) and "2 of 2" in str(err), str(err)
else:
    raise AssertionError("two holders did not raise")

# Still in step after the errors.
assert torch.equal(total(torch.ones(1)), torch.full((1,), 2.0))
print(f"RANK {r} OK", flush=True)
