"""The content check of a loader position (``state_dict`` of a prepared loader).

``load_state_dict`` runs it before changing anything, and ``load_state`` runs it in its first
phase (through ``check_state_dict``), so a position file whose content is wrong is refused
while the run is still untouched: every value must have the type and range that
``state_dict`` writes, and the position must lie within the loader's epoch.
"""

from __future__ import annotations

from collections.abc import Mapping
from numbers import Integral
from typing import Any

import torch

from ._stateful import STATE_KEY


def _is_int(value: Any) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def _refuse(key: str, rule: str, value: Any) -> ValueError:
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return ValueError(
        f"a loader position's {key!r} must be {rule}; got {shown}. Pass the dict that "
        "state_dict() returned (a checkpoint whose position file holds this was edited or "
        "damaged: load an earlier one)."
    )


def check_position_state(state: Any, num_batches: int | None, stateful: bool, version: int) -> None:
    """Refuse a position that ``state_dict`` could not have written for this loader.

    Args:
        state: The position to check.
        num_batches: Batches of one epoch of this loader (None when it has no length).
        stateful: The loader keeps its workers' state (``use_stateful_dataloader``).
        version: The newest position format this loader reads.

    Raises:
        TypeError: ``state`` is not a dict.
        KeyError: ``epoch`` or ``batches_yielded`` is missing.
        ValueError: a value of the wrong type or out of range, naming the key, the rule and
            the value.
    """
    if not isinstance(state, Mapping):
        raise TypeError(
            f"a loader position is the dict state_dict() returns; got a {type(state).__name__}. "
            "Pass that dict."
        )
    missing = {"epoch", "batches_yielded"} - set(state)
    if missing:
        raise KeyError(
            f"a loader state needs the keys 'epoch' and 'batches_yielded'; {sorted(missing)} "
            f"missing from {sorted(map(str, state))}. Pass the dict that state_dict() returned."
        )
    saved_version = state.get("version", version)
    if not _is_int(saved_version) or not 1 <= saved_version <= version:
        raise _refuse(
            "version", f"an int from 1 to {version} (this loader's format)", saved_version
        )
    epoch = state["epoch"]
    if not _is_int(epoch) or epoch < 0:
        raise _refuse("epoch", "an int >= 0", epoch)
    done = state["batches_yielded"]
    if not _is_int(done) or done < 0:
        raise _refuse("batches_yielded", "an int >= 0", done)
    if num_batches is not None and done > num_batches:
        raise _refuse(
            "batches_yielded", f"at most the {num_batches} batches of this loader's epoch", done
        )
    seed = state.get("sampler_seed")
    if seed is not None and not _is_int(seed):
        raise _refuse("sampler_seed", "an int or None", seed)
    total = state.get("total_batch_size")
    if total is not None and (not _is_int(total) or total < 1):
        raise _refuse("total_batch_size", "an int >= 1 or None", total)
    generator_state = state.get("generator_state")
    if generator_state is not None:
        _check_generator_state(generator_state)
    inner = state.get(STATE_KEY)
    if inner is not None and not isinstance(inner, Mapping):
        raise _refuse(STATE_KEY, "a dict (StatefulDataLoader's state) or None", inner)
    if inner is not None and not stateful:
        raise ValueError(
            "a loader prepared without use_stateful_dataloader cannot restore worker state; "
            f"this state holds {STATE_KEY!r} (saved by a stateful loader). Prepare the "
            "loader with DataLoaderConfiguration(use_stateful_dataloader=True)."
        )


def _check_generator_state(value: Any) -> None:
    rule = "a torch.uint8 tensor from torch.Generator.get_state() or None"
    if not isinstance(value, torch.Tensor) or value.dtype != torch.uint8 or value.dim() != 1:
        raise _refuse("generator_state", rule, value)
    try:
        torch.Generator().set_state(value.clone())  # a scratch generator: nothing changes
    except (RuntimeError, ValueError) as exc:
        raise _refuse(
            "generator_state", f"{rule} ({exc})", f"<tensor of {value.numel()}>"
        ) from None
