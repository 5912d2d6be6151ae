"""Run by every process of a gloo job: collectives of parameters, views and requires-grad tensors.

Usage: torchrun --nproc_per_node N worker_params.py N
Prints ``RANK <r> OK`` when every check of that process passed.
"""

from __future__ import annotations

import sys

import torch
from accel_state import PartialState

import accel_collectives as ac

state = PartialState()
n, r = state.num_processes, state.process_index
assert n == int(sys.argv[1]), (n, sys.argv)
ranks = range(n)


def eq(actual: torch.Tensor, expected: torch.Tensor) -> None:
    assert isinstance(actual, torch.Tensor), type(actual)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert torch.equal(actual.detach(), expected.detach()), (actual, expected)


# A model's parameters: leaves that require grad, of every rank (0-d like the reference's
# RegressionModel.a, a weight matrix, a view and a transposed view of it).
a = torch.nn.Parameter(torch.tensor(float(r)))
weight = torch.nn.Parameter(torch.arange(6.0).reshape(2, 3) + 10 * r)
by_rank = [torch.arange(6.0).reshape(2, 3) + 10 * k for k in ranks]

eq(ac.gather(a), torch.tensor([float(k) for k in ranks]))
eq(ac.gather(weight), torch.cat(by_rank))
eq(ac.gather(weight[0]), torch.cat([w[0] for w in by_rank]))
eq(ac.gather(weight.t()), torch.cat([w.t() for w in by_rank]))
eq(ac.gather({"a": a, "w": [weight[:, 1:]]})["w"][0], torch.cat([w[:, 1:] for w in by_rank]))
# a non-leaf that requires grad (the output of a layer)
eq(ac.gather(weight * 2), torch.cat([w * 2 for w in by_rank]))
assert not ac.gather(a).requires_grad

eq(ac.reduce(weight, reduction="sum"), sum(by_rank))
eq(ac.reduce(weight.t(), reduction="mean"), sum(by_rank).t() / n)
eq(ac.reduce(a, reduction="max"), torch.tensor(float(n - 1)))

eq(ac.pad_across_processes(weight), weight)
grown = ac.pad_across_processes(torch.nn.Parameter(torch.ones(r + 1, 2)))
eq(grown, torch.cat([torch.ones(r + 1, 2), torch.zeros(n - 1 - r, 2)]))

# broadcast overwrites in place: parameters are updated under no_grad, as optimizers do
sent = torch.nn.Parameter(torch.full((2, 3), float(r)))
out = ac.broadcast(sent, from_process=0)
eq(out, torch.zeros(2, 3))
eq(sent, torch.zeros(2, 3))
assert sent.requires_grad and sent.grad_fn is None
base = torch.nn.Parameter(torch.full((3, 2), float(r)))
ac.broadcast(base.t(), from_process=n - 1)
eq(base, torch.full((3, 2), float(n - 1)))

for call in (ac.gather, ac.reduce, ac.broadcast):
    try:
        call(torch.ones(2).to_sparse())
    except TypeError as err:
        assert "layout torch.sparse_coo" in str(err) and "to_dense()" in str(err), err
    else:
        raise AssertionError(f"{call.__name__} of a sparse tensor did not fail")

state.wait_for_everyone()
print(f"RANK {r} OK", flush=True)

# A failure that is not about shapes names its real cause (last: the
# process group is not used after it).
try:
    ac.gather(torch.ones(2, dtype=torch.float8_e4m3fn))
except RuntimeError as err:
    text = str(err)
    assert text.startswith("gather failed on a tensor of shape [2], dtype torch.float8_e4m3fn"), (
        text
    )
    assert "RuntimeError: Invalid scalar type." in text, text
    assert "convert the tensor first" in text, text
else:
    raise AssertionError("gather of a float8 tensor on gloo did not fail")
print(f"RANK {r} CAUSE NAMED", flush=True)
