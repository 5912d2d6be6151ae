"""Run under torchrun: ``split_between_processes`` of accel and of the reference library on the
same inputs, compared on every rank. Prints one summary line per rank and one line per
difference."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import accelerate
import torch
from accel_state import PartialState


def _inputs() -> list[tuple[str, Any]]:
    cases: list[tuple[str, Any]] = []
    for length in range(0, 10):
        items = [f"item{k}" for k in range(length)]
        cases.append((f"list[{length}]", items))
        cases.append((f"tuple[{length}]", tuple(items)))
        cases.append((f"tensor1d[{length}]", torch.arange(length)))
        cases.append((f"tensor2d[{length}]", torch.arange(length * 3).reshape(length, 3)))
        if length:
            cases.append(
                (
                    f"dict[{length}]",
                    {"prompt": items, "ids": torch.arange(length), "score": list(range(length))},
                )
            )
    return cases


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and torch.equal(a, b)
        )
    if isinstance(a, dict) or isinstance(b, dict):
        return type(a) is type(b) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _split(state: Any, inputs: Any, apply_padding: bool) -> Any:
    with state.split_between_processes(copy.deepcopy(inputs), apply_padding=apply_padding) as share:
        return share


def _reference_runs(name: str, length: int, padding: bool, num_processes: int) -> bool:
    """Whether the reference library handles the case (its failures are listed in the
    migration guide; a failure inside its padding collective would desynchronise the ranks)."""
    if not padding:
        return True
    if name.startswith("tuple"):
        return False  # it concatenates a list to the tuple: TypeError
    if name.startswith("list"):
        return length > 0  # it reads inputs[-1]: IndexError on an empty list
    return length >= num_processes  # tensors: its padding collective fails on an empty share


def _via_lists(reference: Any, inputs: Any, padding: bool) -> Any:
    """The reference's answer for the same items given as a list, in the input's type."""
    if isinstance(inputs, dict):
        return {key: _via_lists(reference, value, padding) for key, value in inputs.items()}
    share = _split(reference, list(inputs), padding)
    if isinstance(inputs, torch.Tensor):
        return torch.stack(share) if share else inputs[:0]
    return type(inputs)(share)


def main() -> None:
    ours = PartialState()
    reference = accelerate.PartialState(cpu=True)
    assert reference.num_processes == ours.num_processes, (reference.num_processes, ours)
    n, rank = ours.num_processes, ours.process_index
    compared = checked = 0
    for (name, inputs), padding in itertools.product(_inputs(), (False, True)):
        length = len(next(iter(inputs.values()))) if isinstance(inputs, dict) else len(inputs)
        mine = _split(ours, inputs, padding)
        if _reference_runs(name, length, padding, n):
            theirs = _split(reference, inputs, padding)
            compared += 1
        elif length == 0:
            theirs = _split(reference, inputs, False)  # an empty input: an empty share
            checked += 1
        else:
            theirs = _via_lists(reference, inputs, padding)
            checked += 1
        if not _same(mine, theirs):
            print(f"rank {rank}: DIFF {name} apply_padding={padding}: {mine!r} != {theirs!r}")
    print(f"rank {rank}: {compared} split cases compared, {checked} checked on {n} processes")
    if isinstance(inputs, dict):
        original = copy.deepcopy(inputs)
        with ours.split_between_processes(inputs, apply_padding=True):
            pass
        print(f"rank {rank}: input dict kept: {_same(inputs, original)}")


if __name__ == "__main__":
    main()
