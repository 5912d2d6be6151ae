"""Debug-mode verification: before a collective, check that every process passes compatible data.

A collective called with tensors of different shapes on different processes either fails deep
inside the backend or waits forever. In debug mode (``ACCEL_DEBUG_MODE=1``) each operation first
exchanges a description of its input (structure, shapes, dtypes) and, when the processes
disagree, every process raises the same [`DistributedOperationException`][accel_collectives.DistributedOperationException] naming the
operation and what each process passed.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from accel_state.hang_watchdog import collective

from ._nested import iter_leaves

# One leaf of a description: (path, shape or None for a non-tensor, dtype or type name).
_Leaf = tuple[str, "tuple[int, ...] | None", str]


class CannotPadNestedTensorWarning(UserWarning):
    """Warned when ``pad_across_processes`` meets a nested tensor, which it cannot pad."""


class DistributedOperationException(RuntimeError):
    """Raised when processes pass incompatible data to the same collective operation.

    The message names the operation and, for each process, the shapes it passed.
    """


def describe(data: Any) -> list[_Leaf]:
    """Describe a nested structure as a list of ``(path, shape, dtype)`` leaves."""
    leaves: list[_Leaf] = []
    for path, leaf in iter_leaves(data):
        if isinstance(leaf, torch.Tensor):
            leaves.append((path, tuple(leaf.shape), str(leaf.dtype).replace("torch.", "")))
        else:
            leaves.append((path, None, type(leaf).__name__))
    return leaves


def _format(leaves: list[_Leaf]) -> str:
    if not leaves:
        return "(nothing)"
    parts = []
    for path, shape, kind in leaves:
        what = f"{list(shape)} {kind}" if shape is not None else kind
        parts.append(f"{path}: {what}" if path else what)
    return ", ".join(parts)


def _first_difference(
    reference: list[_Leaf], other: list[_Leaf], free_dim: int | None
) -> str | None:
    """Return a sentence on the first disagreement of two descriptions, or None if they agree."""
    if [p for p, _, _ in reference] != [p for p, _, _ in other]:
        return "the nested structures differ (keys, lengths or nesting)"
    for (path, shape_a, kind_a), (_, shape_b, kind_b) in zip(reference, other):
        where = path or "the tensor"
        if kind_a != kind_b:
            return f"{where} has dtype/type {kind_b} instead of {kind_a}"
        if shape_a is None or shape_b is None or shape_a == shape_b:
            continue
        if len(shape_a) != len(shape_b):
            return f"{where} has {len(shape_b)} dimensions instead of {len(shape_a)}"
        for d, (a, b) in enumerate(zip(shape_a, shape_b)):
            if a != b and (free_dim is None or d != free_dim % len(shape_a)):
                return f"{where} has size {b} instead of {a} in dim {d}"
    return None


def verify_operation(
    operation: str,
    data: Any,
    *,
    free_dim: int | None = None,
    rule: str,
    fix: str,
) -> None:
    """Check that every process passes the same structure, dtypes and shapes to ``operation``.

    Must be called by every process (it is itself a collective).

    Args:
        operation: Name of the operation, used in the message.
        data: This process's input.
        free_dim: A dimension whose size may differ between processes, or None.
        rule: What the operation requires, used in the message.
        fix: How to make the inputs agree, used in the message.

    Raises:
        DistributedOperationException: on every process, if any two processes disagree.
    """
    local = describe(data)
    everyone: list[Any] = [None] * dist.get_world_size()
    with collective("debug check"):
        dist.all_gather_object(everyone, local)
    reference = everyone[0]
    problems = []
    for rank, other in enumerate(everyone[1:], start=1):
        difference = _first_difference(reference, other, free_dim)
        if difference is not None:
            problems.append(f"process {rank}: {difference} (compared with process 0)")
    if not problems:
        return
    lines = "\n".join(
        f"  process {rank}: {_format(leaves)}" for rank, leaves in enumerate(everyone)
    )
    raise DistributedOperationException(
        f"{operation}: {rule}. The processes passed:\n{lines}\n"
        + "\n".join(f"  -> {p}" for p in problems)
        + f"\n{fix}"
    )


def verify_same_length(operation: str, object_list: list[Any]) -> None:
    """Check that every process passes a list of the same length to ``operation``.

    Raises:
        DistributedOperationException: on every process, if the lengths differ.
    """
    lengths: list[Any] = [None] * dist.get_world_size()
    with collective("debug check"):
        dist.all_gather_object(lengths, len(object_list))
    if len(set(lengths)) > 1:
        lines = "\n".join(f"  process {r}: a list of {n} objects" for r, n in enumerate(lengths))
        raise DistributedOperationException(
            f"{operation}: every process must pass a list of the same length. The processes "
            f"passed:\n{lines}\nAllocate the same number of slots on every process "
            "(e.g. [None] * n on the receivers)."
        )
