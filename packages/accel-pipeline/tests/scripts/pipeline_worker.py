"""Runs on 2 processes: pipelined outputs against the unsplit model, errors on every process.

Prints ``RANK <r> OK <check>`` for each check that passed on that process.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))

from accel_state import PartialState
from toy_models import ToyLM, Untraceable, toy_inputs

from accel_pipeline import PipelineTraceError, prepare_pippy

# Chunks change the batch size of each matrix product, which may change float rounding.
ATOL = RTOL = 1e-5

state = PartialState()
rank, last = state.process_index, state.num_processes - 1


def ok(check: str) -> None:
    print(f"RANK {rank} OK {check}", flush=True)


def assert_close(actual: dict, expected: dict) -> None:
    assert isinstance(actual, dict) and actual.keys() == expected.keys(), (type(actual), actual)
    for key in expected:
        torch.testing.assert_close(actual[key], expected[key], atol=ATOL, rtol=RTOL)


def expect_error(call, error: type[Exception], *needles: str) -> str:
    try:
        call()
    except error as err:
        text = str(err)
        for needle in needles:
            assert needle in text, (needle, text)
        return text
    raise AssertionError(f"expected {error.__name__}")


# 1. split_points="auto", num_chunks defaults to the number of processes, output on last only.
torch.manual_seed(0)
model = ToyLM().eval()
# Each process keeps only its stage's weights, so the reference is a copy made beforehand.
whole = copy.deepcopy(model)
model = prepare_pippy(model, example_args=(toy_inputs(2),))
assert model.pippy_split_points == ["blocks.2"], model.pippy_split_points
assert "forward" not in model.blocks[2].__dict__, "split module left patched"
for batch in (2, 3, 5, 1):
    x = toy_inputs(batch, seed=batch)
    out = model(x)
    if rank == last:
        assert_close(out, whole(x))
    else:
        assert out is None, type(out)
ok("auto")

# 2. Explicit split point, num_chunks=4, gather_output=True: every process gets the output.
torch.manual_seed(1)
model = ToyLM(widths=(8, 64, 8)).eval()
whole = copy.deepcopy(model)
model = prepare_pippy(
    model,
    split_points=["blocks.1"],
    example_args=(toy_inputs(4),),
    num_chunks=4,
    gather_output=True,
)
for batch in (4, 7, 9):
    x = toy_inputs(batch, seed=10 + batch)
    assert_close(model(x), whole(x))
ok("explicit_gather_chunks4")

# 3. Keyword inputs, num_chunks=1; bad calls raise on every process and leave it usable.
torch.manual_seed(2)
model = ToyLM().eval()
whole = copy.deepcopy(model)
ids, mask = toy_inputs(3), torch.rand(3, 6)
model = prepare_pippy(model, example_kwargs={"ids": ids, "mask": mask}, num_chunks=1)
out = model(ids=ids, mask=mask)
if rank == last:
    assert_close(out, whole(ids=ids, mask=mask))
expect_error(lambda: model(ids=ids), ValueError, "['ids', 'mask']", "['ids']")
expect_error(lambda: model(ids=toy_inputs(3, seq=7), mask=mask), ValueError, "(3, 7)")
ids2, mask2 = toy_inputs(5, seed=5), torch.rand(5, 6)
out = model(ids=ids2, mask=mask2)
if rank == last:
    assert_close(out, whole(ids=ids2, mask=mask2))
ok("kwargs_and_errors")

# 4. A forward that cannot be traced: the error names the submodule, on every process.
model = Untraceable().eval()
text = expect_error(
    lambda: prepare_pippy(model, split_points=["blocks.1"], example_args=(toy_inputs(2),)),
    PipelineTraceError,
    "'blocks.1.gate'",
    "DataDependentGate",
)
assert "forward" not in model.blocks[1].__dict__
ok("untraceable")

state.wait_for_everyone()
ok("done")
