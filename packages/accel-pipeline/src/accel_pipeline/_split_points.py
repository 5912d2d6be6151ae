"""Where to cut a model into pipeline stages: balanced automatic split points and checks.

A stage starts at a module (``SplitPoint.BEGINNING``), so a split point must be a module that the
forward pass calls exactly once. The automatic search cuts the model into *units* (leaf modules,
or whole modules whose class must not be split), orders them by a real forward pass, weighs them
with [`accel_bigmodel.compute_module_sizes`][accel_bigmodel.compute_module_sizes], and picks the cuts that minimise the largest
stage.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from accel_bigmodel import compute_module_sizes
from torch import nn


@dataclass
class ForwardProbe:
    """What one eager forward pass with the example inputs showed.

    Attributes:
        order: Names of the watched modules in the order of their first call.
        calls: Number of calls of each watched module (0 when never called).
        output: The model's output for the example inputs.
    """

    order: list[str]
    """Names of the watched modules in the order of their first call."""
    calls: dict[str, int]
    """Number of calls of each watched module (0 when never called)."""
    output: Any
    """The model's output for the example inputs."""


def probe_forward(
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    watch: Mapping[str, nn.Module],
) -> ForwardProbe:
    """Runs ``model(*args, **kwargs)`` once without gradients, recording calls of ``watch``.

    Args:
        model: The model.
        args: Positional inputs.
        kwargs: Keyword inputs.
        watch: ``{name: module}`` of the modules whose calls are recorded.

    Returns:
        The call order, call counts and output.
    """
    order: list[str] = []
    calls = dict.fromkeys(watch, 0)
    handles = []

    def make_hook(name: str) -> Any:
        def hook(module: nn.Module, inputs: Any) -> None:
            if calls[name] == 0:
                order.append(name)
            calls[name] += 1

        return hook

    try:
        for name, module in watch.items():
            handles.append(module.register_forward_pre_hook(make_hook(name)))
        with torch.no_grad():
            output = model(*args, **kwargs)
    finally:
        for handle in handles:
            handle.remove()
    return ForwardProbe(order=order, calls=calls, output=output)


def pipeline_units(
    model: nn.Module, no_split_module_classes: Iterable[str] | None
) -> dict[str, nn.Module]:
    """Returns the modules a stage boundary may fall before, in registration order.

    A unit is a module without children or a module whose class name is in
    ``no_split_module_classes``; the search does not look inside a unit.

    Args:
        model: The model.
        no_split_module_classes: Class names of modules that must stay whole.

    Returns:
        ``{dotted_name: module}``.
    """
    no_split = set(no_split_module_classes or ())
    units: dict[str, nn.Module] = {}
    seen: set[int] = set()
    stack: list[tuple[str, nn.Module]] = list(reversed(list(model.named_children())))
    while stack:
        name, module = stack.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        children = list(module.named_children())
        if not children or type(module).__name__ in no_split:
            units[name] = module
            continue
        stack.extend(reversed([(f"{name}.{child}", sub) for child, sub in children]))
    return units


def _unit_weights(model: nn.Module, names: Sequence[str]) -> list[int]:
    """Bytes of each unit, plus the tensors held directly by a container, on its first unit."""
    sizes = compute_module_sizes(model)
    weights = [int(sizes.get(name, 0)) for name in names]
    first_under: dict[str, int] = {}
    for index, name in enumerate(names):
        parts = name.split(".")
        for depth in range(len(parts)):
            first_under.setdefault(".".join(parts[:depth]), index)
    for owner, module in model.named_modules():
        if owner in names:
            continue
        prefix = f"{owner}." if owner else ""
        direct = [
            n for n, t in (*module._parameters.items(), *module._buffers.items()) if t is not None
        ]
        if direct and owner in first_under:
            weights[first_under[owner]] += sum(int(sizes.get(prefix + n, 0)) for n in direct)
    return weights


def balanced_cuts(weights: Sequence[int], allowed: Sequence[int], num_stages: int) -> list[int]:
    """Chooses ``num_stages - 1`` cut positions minimising the weight of the heaviest stage.

    A cut at ``i`` makes item ``i`` the first item of a new stage; only positions in ``allowed``
    (each in ``1 .. len(weights) - 1``) may be used.

    Args:
        weights: Weight of each item, in order.
        allowed: Positions where a stage may start.
        num_stages: Number of stages.

    Returns:
        The sorted cut positions.

    Raises:
        ValueError: When there are fewer allowed positions than ``num_stages - 1``.
    """
    n = len(weights)
    positions = sorted({p for p in allowed if 0 < p < n})
    if len(positions) < num_stages - 1:
        raise ValueError(
            f"{num_stages} stages need {num_stages - 1} places to cut, but only "
            f"{len(positions)} exist. Use fewer processes or allow more split places."
        )
    if num_stages == 1:
        return []
    prefix = [0]
    for w in weights:
        prefix.append(prefix[-1] + w)
    points = [0, *positions, n]
    total_at = [prefix[p] for p in points]
    m = len(points)
    # best[i]: smallest possible heaviest stage when at most j stages cover items before points[i]
    # (non-decreasing in i); choice[j][i] is the start of the last stage.
    best = list(total_at)
    choices: list[list[int]] = [[0] * m]
    for _ in range(2, num_stages + 1):
        new_best = list(best)
        choice = list(range(m))
        for i in range(1, m):
            # max(best[p], total_at[i] - total_at[p]) over p < i is smallest where the two cross.
            lo, hi = 0, i - 1
            while lo < hi:
                mid = (lo + hi) // 2
                if best[mid] >= total_at[i] - total_at[mid]:
                    hi = mid
                else:
                    lo = mid + 1
            for p in (lo - 1, lo):
                if 0 <= p < i:
                    value = max(best[p], total_at[i] - total_at[p])
                    if value < new_best[i] or (value == new_best[i] and choice[i] == i):
                        new_best[i], choice[i] = value, p
        best = new_best
        choices.append(choice)
    cuts: list[int] = []
    i = m - 1
    for choice in reversed(choices[1:]):
        p = choice[i]
        if p == i:
            continue
        if p == 0:
            break
        cuts.append(p)
        i = p
    used = set(cuts)
    # Fewer stages were as good: add cuts (they never make a stage heavier) to reach the count.
    for index in range(1, m - 1):
        if len(used) >= num_stages - 1:
            break
        used.add(index)
    return sorted(points[i] for i in used)


def find_split_points(
    model: nn.Module,
    num_stages: int,
    example_args: tuple[Any, ...] = (),
    example_kwargs: Mapping[str, Any] | None = None,
    no_split_module_classes: Sequence[str] | None = None,
) -> list[str]:
    """Finds the module names where a balanced pipeline of ``num_stages`` stages starts its stages.

    The model runs once on the example inputs to learn the order in which modules execute; the
    weights of the modules (from [`accel_bigmodel.compute_module_sizes`][accel_bigmodel.compute_module_sizes]) are then cut into
    contiguous stages so that the heaviest stage is as light as possible. Only modules called
    exactly once can start a stage, and modules whose class is in ``no_split_module_classes``
    (by default ``model._no_split_modules`` when the model defines it, as ``transformers`` models
    do) are never cut inside.

    Args:
        model: The model (with real weights, on the CPU or its device).
        num_stages: Number of pipeline stages (one per process).
        example_args: Positional example inputs.
        example_kwargs: Keyword example inputs.
        no_split_module_classes: Class names of modules that must stay whole.

    Returns:
        ``num_stages - 1`` module names, in execution order.

    Raises:
        ValueError: When ``num_stages`` is not a positive integer, or the model has fewer places
            to cut than needed.
    """
    if not isinstance(num_stages, int) or num_stages < 1:
        raise ValueError(
            f"num_stages must be a positive integer; got {num_stages!r}. Pass the number of "
            "processes."
        )
    if num_stages == 1:
        return []
    if no_split_module_classes is None:
        no_split_module_classes = list(getattr(model, "_no_split_modules", None) or [])
    units = pipeline_units(model, no_split_module_classes)
    probe = probe_forward(model, tuple(example_args), dict(example_kwargs or {}), units)
    names = probe.order
    allowed = [i for i, name in enumerate(names) if probe.calls[name] == 1]
    try:
        cuts = balanced_cuts(_unit_weights(model, names), allowed, num_stages)
    except ValueError:
        raise ValueError(
            f"split_points='auto' needs {num_stages - 1} modules called exactly once to start "
            f"{num_stages} stages, but the forward pass offers only {max(len(allowed) - 1, 0)} "
            f"(candidates in execution order: {names}). Pass split_points as a list of module "
            "names, or remove classes from no_split_module_classes so that big blocks can be "
            "cut inside."
        ) from None
    return [names[i] for i in cuts]


def check_split_points(model: nn.Module, split_points: Any, num_processes: int) -> list[str]:
    """Validates user-given split points before any tracing.

    Args:
        model: The model.
        split_points: The value passed as ``split_points``.
        num_processes: Number of processes (= stages).

    Returns:
        The split points as a list of names.

    Raises:
        ValueError: When the value is not ``"auto"`` or a list of distinct names of existing
            submodules, one fewer than the number of processes.
    """
    if isinstance(split_points, str):
        raise ValueError(
            f"split_points must be 'auto' or a list of module names; got the string "
            f"{split_points!r}. Pass split_points=['{split_points}'] to split at that module, "
            "or 'auto'."
        )
    if not isinstance(split_points, Iterable) or isinstance(split_points, (bytes, Mapping)):
        raise ValueError(
            f"split_points must be 'auto' or a list of module names; got "
            f"{type(split_points).__name__} {split_points!r}. Pass e.g. split_points=['layers.4'] "
            "or 'auto'."
        )
    names = list(split_points)
    modules = dict(model.named_modules())
    for name in names:
        if not isinstance(name, str) or not name or name not in modules:
            close = difflib.get_close_matches(str(name), [n for n in modules if n], n=3)
            hint = f" Close names: {close}." if close else ""
            raise ValueError(
                f"Each split point must name a submodule of {type(model).__name__}; {name!r} "
                f"does not.{hint} Use names from model.named_modules()."
            )
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(
            f"split_points must be distinct (each starts one stage); {repeated} appear more than "
            f"once in {names}. Remove the repeated names."
        )
    if len(names) != num_processes - 1:
        raise ValueError(
            f"There is one pipeline stage per process, so {num_processes} processes need "
            f"{num_processes - 1} split points; got {len(names)}: {names}. Pass "
            f"{num_processes - 1} module names, or split_points='auto'."
        )
    return names


def check_called_once(probe: ForwardProbe, split_points: Sequence[str]) -> None:
    """Raises when a split point is not called exactly once by the forward pass, or when the
    split points are not listed in the order the forward pass runs them.

    Raises:
        ValueError: Naming the split point and how many times it was called, or the first two
            split points listed out of order.
    """
    for name in split_points:
        count = probe.calls.get(name, 0)
        if count != 1:
            raise ValueError(
                f"A split point must be a module that the forward pass calls exactly once; "
                f"{name!r} was called {count} times with the example inputs. Choose a module "
                "that runs once per forward pass (e.g. a whole layer), or split_points='auto'."
            )
    position = {name: index for index, name in enumerate(probe.order)}
    ordered = sorted(split_points, key=lambda name: position[name])
    for listed, runs in zip(split_points, ordered):
        if listed != runs:
            raise ValueError(
                f"Split points must be listed in the order the forward pass runs them (stage k "
                f"starts at the k-th); {listed!r} is listed before {runs!r} but runs after it. "
                f"Pass split_points={ordered}."
            )
