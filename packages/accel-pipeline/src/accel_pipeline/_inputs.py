"""The shape contract between the traced pipeline and each call.

Tracing fixes every shape, so a pipeline runs rounds of exactly ``num_chunks * chunk_size`` rows.
A call may pass any batch size: rows are cut into rounds and the last round is filled up by
repeating its last row; the extra rows are dropped from the output. Everything but the batch size
must match the example inputs.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import _pytree as pytree


@dataclass(frozen=True)
class InputSignature:
    """The structure of the example inputs, minus the batch size.

    Attributes:
        spec: Tree structure of ``(args, kwargs)``.
        leaves: Leaves of ``(args, kwargs)``; tensors kept for their shape and dtype.
        batch_size: First dimension shared by every example tensor.
    """

    spec: Any
    """Tree structure of ``(args, kwargs)``."""
    leaves: tuple[Any, ...]
    """Leaves of ``(args, kwargs)``; tensors kept for their shape and dtype."""
    batch_size: int
    """First dimension shared by every example tensor."""

    @functools.cached_property
    def kwarg_names(self) -> list[str]:
        """Keyword names of the example inputs (worked out once: every call checks them)."""
        return list(pytree.tree_unflatten(list(self.leaves), self.spec)[1])


def _where(spec: Any, leaves: Sequence[Any], index: int) -> str:
    """A readable path (``args[0]``, ``kwargs['mask']``) of leaf ``index``."""
    paths, _ = pytree.tree_flatten_with_path(pytree.tree_unflatten(list(leaves), spec))
    keys = paths[index][0]
    head = "args" if keys and getattr(keys[0], "idx", None) == 0 else "kwargs"
    return head + "".join(str(k) for k in keys[1:])


def input_signature(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> InputSignature:
    """Describes the example inputs.

    Raises:
        ValueError: When no input is a tensor, a tensor has no batch dimension, or the tensors
            disagree on the batch size.
    """
    leaves, spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
    sizes = {}
    for index, leaf in enumerate(leaves):
        if isinstance(leaf, torch.Tensor):
            if leaf.dim() == 0:
                raise ValueError(
                    "Every tensor input is split into chunks along its first (batch) dimension; "
                    f"{_where(spec, leaves, index)} is a 0-d tensor. Give it a batch dimension "
                    "or pass it as a Python number."
                )
            sizes[_where(spec, leaves, index)] = leaf.shape[0]
    if not sizes:
        raise ValueError(
            "prepare_pippy needs example inputs holding at least one tensor to trace the model; "
            f"got example_args={args!r} and example_kwargs={dict(kwargs)!r}. Pass "
            "example_args=(input_ids,) or example_kwargs={'input_ids': input_ids}."
        )
    if len(set(sizes.values())) != 1:
        raise ValueError(
            "Every example tensor is split along its first dimension, so all must have the same "
            f"batch size; got {sizes}. Give every tensor input the same first dimension."
        )
    return InputSignature(spec=spec, leaves=tuple(leaves), batch_size=next(iter(sizes.values())))


class _Where:
    """The readable path of one input leaf, worked out only when formatted (errors only)."""

    __slots__ = ("index", "leaves", "spec")

    def __init__(self, spec: Any, leaves: Sequence[Any], index: int) -> None:
        self.spec, self.leaves, self.index = spec, leaves, index

    def __str__(self) -> str:
        return _where(self.spec, self.leaves, self.index)


def check_call(signature: InputSignature, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> int:
    """Checks that a call matches the example inputs except for the batch size.

    Returns:
        The batch size of the call.

    Raises:
        ValueError: Naming the first difference and how to fix it.
    """
    expected_kwargs = signature.kwarg_names
    if sorted(kwargs) != sorted(expected_kwargs):
        raise ValueError(
            "A pipelined model must be called with the keyword inputs it was traced with; "
            f"traced with {sorted(expected_kwargs)}, called with {sorted(kwargs)}. Pass exactly "
            "those keywords, or prepare the model again with matching example_kwargs."
        )
    leaves, spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
    if spec != signature.spec:
        raise ValueError(
            "A pipelined model must be called with inputs structured like its example inputs; "
            f"traced with {signature.spec}, called with {spec}. Pass the same number and nesting "
            "of positional and keyword inputs."
        )
    batch: int | None = None
    for index, (leaf, example) in enumerate(zip(leaves, signature.leaves)):
        # the readable path costs a tree walk per leaf: built only for an error message
        where = _Where(spec, leaves, index)
        if isinstance(example, torch.Tensor):
            if not isinstance(leaf, torch.Tensor):
                raise ValueError(
                    f"{where} was a tensor in the example inputs and is a "
                    f"{type(leaf).__name__} now. Pass a tensor."
                )
            if (
                leaf.dim() == 0
                or leaf.shape[1:] != example.shape[1:]
                or leaf.dtype != example.dtype
            ):
                shape = (*example.shape[1:],)
                raise ValueError(
                    "Tracing fixes every dimension but the first, so each input must keep the "
                    f"example's shape after the batch size and its dtype; {where} has shape "
                    f"{tuple(leaf.shape)} and dtype {leaf.dtype}, expected (batch, "
                    f"{', '.join(map(str, shape))}) and {example.dtype}. Pad or cut the input to "
                    "that shape, or prepare the model again with example inputs of this shape."
                )
            if batch is None:
                batch = leaf.shape[0]
            elif leaf.shape[0] != batch:
                raise ValueError(
                    "Every tensor input is split along its first dimension, so all must have the "
                    f"same batch size; {where} has {leaf.shape[0]} rows, an earlier input has "
                    f"{batch}. Give every tensor input the same batch size."
                )
        elif not _same_constant(leaf, example):
            raise ValueError(
                "Non-tensor inputs are fixed into the traced graph; "
                f"{where} was {example!r} in the example inputs and is {leaf!r} now. Pass the "
                "same value, or prepare the model again with this value."
            )
    if not batch:
        raise ValueError(
            f"A pipelined model needs at least one row of input; got a batch size of {batch}. "
            "Pass a non-empty batch."
        )
    return batch


def _same_constant(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:
        return a is b


def _rows(tensor: torch.Tensor, start: int, size: int) -> torch.Tensor:
    part = tensor[start : start + size]
    missing = size - part.shape[0]
    if missing:
        filler = part[-1:].expand(missing, *part.shape[1:])
        part = torch.cat([part, filler])
    return part


def iter_rounds(
    args: tuple[Any, ...], kwargs: Mapping[str, Any], batch: int, round_size: int
) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Yields ``(args, kwargs)`` holding exactly ``round_size`` rows each, padding the last one.

    Args:
        args: Positional inputs of the call.
        kwargs: Keyword inputs of the call.
        batch: Batch size of the call.
        round_size: Rows per pipeline step (``num_chunks * chunk_size``).
    """
    if batch == round_size:
        yield tuple(args), dict(kwargs)
        return
    for start in range(0, batch, round_size):

        def take(tensor: torch.Tensor, start: int = start) -> torch.Tensor:
            return _rows(tensor, start, round_size)

        yield pytree.tree_map_only(torch.Tensor, take, (tuple(args), dict(kwargs)))


def number_of_rounds(batch: int, round_size: int) -> int:
    """Number of pipeline steps for ``batch`` rows."""
    return math.ceil(batch / round_size)


def merge_rounds(rounds: Sequence[Sequence[torch.Tensor]], batch: int) -> list[torch.Tensor]:
    """Concatenates the flat outputs of each round and keeps the first ``batch`` rows."""
    if len(rounds) == 1:
        return [t[:batch] if t.shape[0] != batch else t for t in rounds[0]]
    return [torch.cat(parts)[:batch] for parts in zip(*rounds)]
