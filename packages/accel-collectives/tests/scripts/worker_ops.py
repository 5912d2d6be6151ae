"""Run by every process of a gloo job: checks each collective against exact expected values.

Usage: torchrun --nproc_per_node N worker_ops.py N
Prints ``RANK <r> OK`` when every check of that process passed.
"""

from __future__ import annotations

import collections
import sys
import warnings

import torch
from accel_state import PartialState

import accel_collectives as ac
from accel_collectives import _ops

Pair = collections.namedtuple("Pair", "x y")


class Batch(collections.UserDict):
    """A Mapping subclass that is not a dict, like transformers' BatchEncoding."""


state = PartialState()
n, r = state.num_processes, state.process_index
assert n == int(sys.argv[1]), (n, sys.argv)
assert state.backend == "gloo" and not state.debug


def eq(actual: torch.Tensor, expected: torch.Tensor) -> None:
    assert isinstance(actual, torch.Tensor), type(actual)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert torch.equal(actual, expected), (actual, expected)


ranks = range(n)

# ------------------------------------------------------------------------------ gather
eq(ac.gather(torch.arange(3) + 10 * r), torch.cat([torch.arange(3) + 10 * k for k in ranks]))
eq(ac.gather(torch.tensor(float(r))), torch.tensor([float(k) for k in ranks]))
base = torch.arange(12).reshape(3, 4) + 100 * r
eq(ac.gather(base.t()), torch.cat([(torch.arange(12).reshape(3, 4) + 100 * k).t() for k in ranks]))
for dtype in (torch.bool, torch.int32, torch.bfloat16, torch.float64):
    eq(
        ac.gather(torch.full((2,), r % 2, dtype=dtype)),
        torch.cat([torch.full((2,), k % 2, dtype=dtype) for k in ranks]),
    )
nested = {
    "a": [
        torch.tensor([r]),
        (torch.ones(1, 2) * r, Pair(torch.tensor([r, r]), torch.tensor([-r]))),
    ],
    "b": Batch({"ids": torch.tensor([[r, r + 1]])}),
}
out = ac.gather(nested)
assert type(out) is dict and type(out["a"]) is list and type(out["a"][1]) is tuple
assert type(out["a"][1][1]) is Pair and type(out["b"]) is Batch
eq(out["a"][0], torch.tensor(list(ranks)))
eq(out["a"][1][0], torch.cat([torch.ones(1, 2) * k for k in ranks]))
eq(out["a"][1][1].x, torch.tensor([v for k in ranks for v in (k, k)]))
eq(out["a"][1][1].y, torch.tensor([-k for k in ranks]))
eq(out["b"]["ids"], torch.tensor([[k, k + 1] for k in ranks]))
try:
    ac.gather({"text": "not a tensor"})
    raise AssertionError("gather of a string did not raise")
except TypeError as err:
    assert "gather_object" in str(err) or "str" in str(err), err

# ----------------------------------------------------------------------- gather_object
assert ac.gather_object([f"r{r}", r]) == [x for k in ranks for x in (f"r{k}", k)]
assert ac.gather_object({"rank": r}) == [{"rank": k} for k in ranks]
assert ac.gather_object((r,)) == [(k,) for k in ranks]
assert ac.gather_object([]) == []

# --------------------------------------------------------------------------- broadcast
src = n - 1
t = torch.full((2, 3), float(r))
res = ac.broadcast(t, from_process=src)
assert res is t
eq(t, torch.full((2, 3), float(src)))
grid = torch.full((3, 2), r)
view = grid.t()  # non-contiguous: the result must still land in ``grid``
assert ac.broadcast(view, from_process=src) is view
eq(grid, torch.full((3, 2), src))
res = ac.broadcast({"x": [torch.tensor([r])], "y": Pair(torch.tensor(r), torch.zeros(2) + r)})
eq(res["x"][0], torch.tensor([0]))
assert type(res["y"]) is Pair
eq(res["y"].x, torch.tensor(0))
eq(res["y"].y, torch.zeros(2))
for bad in (-1, n):
    try:
        ac.broadcast(torch.zeros(1), from_process=bad)
        raise AssertionError("broadcast from a bad process did not raise")
    except ValueError as err:
        assert str(bad) in str(err), err

objs = [{"payload": list(range(5)), "from": r}, "text"] if r == src else [None, None]
assert ac.broadcast_object_list(objs, from_process=src) is objs
assert objs == [{"payload": list(range(5)), "from": src}, "text"], objs

# ------------------------------------------------------------------------------ reduce
x = torch.arange(2) + 1 + 2 * r
orig = x.clone()
eq(ac.reduce(x, reduction="sum"), sum(torch.arange(2) + 1 + 2 * k for k in ranks))
eq(x, orig)  # the input is left alone
mean = ac.reduce(torch.tensor([float(r), 2.0 * r]))  # default: mean
eq(mean, torch.tensor([sum(ranks) / n, 2.0 * sum(ranks) / n]))
int_mean = ac.reduce(torch.tensor([r, 1]))
assert int_mean.is_floating_point()
assert torch.allclose(int_mean, torch.tensor([sum(ranks) / n, 1.0]))
eq(ac.reduce(torch.tensor([1.0]), reduction="sum", scale=0.5), torch.tensor([n * 0.5]))
local = torch.tensor([float(r)])
none = ac.reduce(local, reduction="none")
eq(none, local)
assert none.data_ptr() != local.data_ptr()
red = ac.reduce([{"a": torch.ones(2) * r}, Pair(torch.tensor(1.0), torch.tensor([r]))], "sum")
assert type(red) is list and type(red[1]) is Pair
eq(red[0]["a"], torch.ones(2) * sum(ranks))
eq(red[1].x, torch.tensor(float(n)))
eq(red[1].y, torch.tensor([sum(ranks)]))
eq(
    ac.reduce(torch.arange(6.0).reshape(2, 3).t() * (r + 1), "sum"),
    torch.arange(6.0).reshape(2, 3).t() * sum(k + 1 for k in ranks),
)
spread = torch.tensor([float(r), -float(r), 5.0])
eq(ac.reduce(spread, reduction="max"), torch.tensor([n - 1.0, 0.0, 5.0]))
eq(ac.reduce(spread, reduction="min"), torch.tensor([0.0, 1.0 - n, 5.0]))
eq(ac.reduce({"k": torch.tensor([r])}, "max")["k"], torch.tensor([n - 1]))
eq(ac.reduce(torch.tensor([1.0 + r]), reduction="max", scale=2.0), torch.tensor([2.0 * n]))
try:
    ac.reduce(torch.ones(1), reduction="avg")
    raise AssertionError("reduce with reduction='avg' did not raise")
except ValueError as err:
    assert "'avg'" in str(err) and "max" in str(err), err

# ---------------------------------------------------------------- pad_across_processes
longest = n
p = ac.pad_across_processes(torch.arange(r + 1))
eq(p, torch.cat([torch.arange(r + 1), torch.zeros(longest - r - 1, dtype=torch.int64)]))
p = ac.pad_across_processes(torch.arange(r + 1) + 1, pad_index=-1, pad_first=True)
eq(p, torch.cat([torch.full((longest - r - 1,), -1), torch.arange(r + 1) + 1]))
m = torch.ones(2, r + 1)
p = ac.pad_across_processes(m, dim=1)
eq(p, torch.cat([torch.ones(2, r + 1), torch.zeros(2, longest - r - 1)], dim=1))
p = ac.pad_across_processes(m, dim=-1, pad_index=7)
eq(p, torch.cat([torch.ones(2, r + 1), torch.full((2, longest - r - 1), 7.0)], dim=1))
same = torch.ones(3)
assert ac.pad_across_processes(same) is same  # already at the largest size
assert ac.pad_across_processes(m, dim=2) is m  # no such dim: unchanged
scalar = torch.tensor(1.0)
assert ac.pad_across_processes(scalar) is scalar
padded = ac.pad_across_processes(
    {"ids": torch.ones(r + 1, 2), "meta": "kept", "pair": Pair(torch.zeros(n - r), torch.ones(1))}
)
eq(padded["ids"], torch.cat([torch.ones(r + 1, 2), torch.zeros(n - r - 1, 2)]))
assert padded["meta"] == "kept" and type(padded["pair"]) is Pair
eq(padded["pair"].x, torch.zeros(n))
eq(padded["pair"].y, torch.ones(1))
# The padded results can be gathered.
eq(
    ac.gather(ac.pad_across_processes(torch.arange(r + 1))),
    torch.cat(
        [torch.cat([torch.arange(k + 1), torch.zeros(n - k - 1, dtype=torch.int64)]) for k in ranks]
    ),
)

# ---------------------------------------------------------------- copy_tensor_to_devices
holder = n - 1
got = ac.copy_tensor_to_devices(torch.arange(4.0).reshape(2, 2) if r == holder else None)
eq(got, torch.arange(4.0).reshape(2, 2))
try:
    ac.copy_tensor_to_devices(None)
    raise AssertionError("copy_tensor_to_devices with no tensor anywhere did not raise")
except ValueError as err:
    assert "every process passed None" in str(err), err

# ------------------------------------- fallback when the single-tensor all-gather is missing
real = _ops._all_gather_single


def unsupported(out: torch.Tensor, inp: torch.Tensor) -> None:
    raise RuntimeError("ProcessGroupGloo does not support all_gather_into_tensor")


_ops._all_gather_single = unsupported
try:
    eq(ac.gather(torch.arange(3) + 10 * r), torch.cat([torch.arange(3) + 10 * k for k in ranks]))
    eq(ac.gather(torch.tensor(r)), torch.tensor(list(ranks)))
    eq(ac.gather(torch.ones(2, 2) * r), torch.cat([torch.ones(2, 2) * k for k in ranks]))
    assert "gloo" in _ops._NO_SINGLE_GATHER
finally:
    _ops._all_gather_single = real
    _ops._NO_SINGLE_GATHER.clear()

# -------------------------------------------------- nested tensors cannot be padded
ragged = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    assert ac.pad_across_processes(ragged) is ragged
assert [w.category for w in caught] == [ac.CannotPadNestedTensorWarning], caught

state.wait_for_everyone()
print(f"RANK {r} OK", flush=True)
