"""Run by every process of a gloo job with ACCEL_DEBUG_MODE=1: mismatched inputs must raise
DistributedOperationException on every process (instead of hanging or aborting), and matching
inputs must still work afterwards.

Usage: ACCEL_DEBUG_MODE=1 torchrun --nproc_per_node N worker_debug.py N
Prints ``RANK <r> OK`` when every check of that process passed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch
from accel_state import PartialState

import accel_collectives as ac
from accel_collectives import DistributedOperationException

state = PartialState()
n, r = state.num_processes, state.process_index
assert n == int(sys.argv[1]) and n >= 2, (n, sys.argv)
assert state.debug


def raises(call: Callable[[], Any], *needles: str) -> str:
    try:
        call()
    except DistributedOperationException as err:
        assert isinstance(err, RuntimeError)
        text = str(err)
        for needle in needles:
            assert needle in text, f"{needle!r} not in:\n{text}"
        return text
    raise AssertionError("no DistributedOperationException raised")


last = n - 1
# gather: the first dimension differs on the last process.
text = raises(
    lambda: ac.gather(torch.zeros(2 + (r == last), 3)),
    "gather",
    "process 0: [2, 3] float32",
    f"process {last}: [3, 3] float32",
    "size 3 instead of 2 in dim 0",
    "pad_across_processes",
)
for k in range(n):
    assert f"process {k}:" in text, text
# gather: nested structures differ.
raises(
    lambda: ac.gather({"a": torch.ones(1)} if r == 0 else {"b": torch.ones(1)}),
    "gather",
    "['a']: [1] float32",
    "['b']: [1] float32",
    "structures differ",
)
# gather: dtypes differ.
raises(
    lambda: ac.gather(torch.ones(2, dtype=torch.float32 if r == 0 else torch.float64)),
    "float32",
    "float64",
)
# reduce and broadcast: any shape difference.
raises(lambda: ac.reduce(torch.ones(2, 1 + (r == last))), "reduce", "dim 1")
raises(lambda: ac.broadcast([torch.ones(1 + r)]), "broadcast", "[0]: [1] float32")
# pad_across_processes: the padded dim may differ, the others may not.
p = ac.pad_across_processes(torch.ones(r + 1, 2))
assert p.shape == (n, 2), p.shape
raises(
    lambda: ac.pad_across_processes(torch.ones(2, r + 1), dim=0),
    "pad_across_processes",
    "only in dim 0",
    "in dim 1",
)
# broadcast_object_list: lists of different lengths.
raises(
    lambda: ac.broadcast_object_list([None] * (1 + (r == last))),
    "broadcast_object_list",
    "a list of 1 objects",
    "a list of 2 objects",
)

# After all of that, the processes are still in step.
got = ac.gather({"x": torch.tensor([r])})
assert torch.equal(got["x"], torch.arange(n)), got
assert ac.reduce(torch.tensor([1.0]), "sum").item() == n
objs = ["hello"] if r == 0 else [None]
assert ac.broadcast_object_list(objs) == ["hello"]

state.wait_for_everyone()
print(f"RANK {r} OK", flush=True)
