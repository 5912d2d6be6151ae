"""Runs on 2 processes: build_pipeline + pippy_forward (the reference's low-level pipeline
steps) give the unsplit model's output, padded batches included, and refuse bad input.

Prints ``RANK <r> OK <check>`` for each check that passed on that process.
"""

from __future__ import annotations

import torch
from accel_state import PartialState

from accel_pipeline import build_pipeline, pippy_forward

state = PartialState()
rank = state.process_index


def ok(check: str) -> None:
    print(f"RANK {rank} OK {check}", flush=True)


torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16), torch.nn.Linear(16, 3)
).eval()
with torch.no_grad():
    batch = torch.randn(4, 6, generator=torch.Generator().manual_seed(1))
    expected = model(batch)
    schedule = build_pipeline(model, ["2"], (batch[:2],), {}, num_chunks=2)
    out = pippy_forward(schedule.step, 2, True, batch)
torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
ok("gathered")

with torch.no_grad():
    odd = torch.randn(3, 6, generator=torch.Generator().manual_seed(2))
    schedule = build_pipeline(model, ["2"], (odd[:2],), {}, num_chunks=2)
    out = pippy_forward(schedule.step, 2, False, odd)  # padded to 4 rows
if rank == state.num_processes - 1:
    torch.testing.assert_close(out[:3], model(odd).detach(), atol=1e-5, rtol=1e-5)
else:
    assert out is None
ok("padded_last_only")

try:
    build_pipeline(model, [], (batch[:2],), {}, num_chunks=2)
except ValueError as err:
    assert "gave 1 stages for 2 processes" in str(err), err
else:
    raise AssertionError("one stage for two processes was accepted")
if rank == 0:
    try:
        pippy_forward(lambda *a, **k: None, 2, False, "no tensor")
    except ValueError as err:
        assert "batch dimension" in str(err), err
    else:
        raise AssertionError("inputs without a batch were accepted")
state.wait_for_everyone()
ok("refusals")
