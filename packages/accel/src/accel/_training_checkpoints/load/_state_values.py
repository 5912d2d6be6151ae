"""Checks of the values inside optimizer and scheduler states, before anything is restored.

torch's ``load_state_dict`` takes an optimizer state whose buffers have another shape than
their parameter, or a learning rate that is a string, without a word; the run then fails at
its next step, deep inside torch. Phase 1 of ``load_state`` checks these values against the
objects they load into: each per-parameter buffer has the shape of its parameter (or of the
buffer the optimizer holds now), and each field that is a number in the object's own state is
a number in the file. A refusal names the file, the key, the value and the fix; nothing has
been restored yet.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import torch

from ..files._manifest import CheckpointIntegrityError

_ELEMENTWISE = frozenset(
    {
        "exp_avg",
        "exp_avg_sq",
        "max_exp_avg_sq",
        "momentum_buffer",
        "square_avg",
        "acc_delta",
        "sum",
        "exp_inf",
        "grad_avg",
        "ax",
        "prev",
    }
)
"""Buffers of torch's optimizers that hold one value per element of their parameter."""


def check_optimizer_values(opt: Any, state: Mapping[str, Any], name: str, input_dir: str) -> None:
    """Refuse a saved optimizer state whose values cannot be ``opt``'s (groups already match).

    Raises:
        CheckpointIntegrityError: naming the file, the key, the value and the fix.
    """
    groups = state["param_groups"]
    current = opt.state_dict()
    for g, (saved, mine, live) in enumerate(zip(groups, current["param_groups"], opt.param_groups)):
        for key, value in saved.items():
            if key != "params" and key in mine:
                _check_number(value, mine[key], f"param_groups[{g}][{key!r}]", name, input_dir)
        per_param = state["state"]
        for saved_id, own_id, param in zip(saved["params"], mine["params"], live["params"]):
            buffers = per_param.get(saved_id)
            if not isinstance(buffers, Mapping):
                continue
            now = current["state"].get(own_id, {})
            for key, value in buffers.items():
                where = f"state[{saved_id!r}][{key!r}]"
                if key in now and not isinstance(now[key], torch.Tensor):
                    _check_number(value, now[key], where, name, input_dir)
                if not isinstance(value, torch.Tensor) or value.dim() == 0:
                    continue
                expected = None
                if isinstance(now.get(key), torch.Tensor):
                    expected = tuple(now[key].shape)
                elif key in _ELEMENTWISE:
                    expected = tuple(param.shape)
                if expected is not None and tuple(value.shape) != expected:
                    raise CheckpointIntegrityError(
                        f"{name} of checkpoint {input_dir!r}: {where} has shape "
                        f"{list(value.shape)}, but it belongs to a parameter of shape "
                        f"{list(param.shape)} and must have shape {list(expected)}. The file "
                        "does not belong to this model (or was altered): prepare the model and "
                        "optimizer of the saving run, or load another checkpoint. Nothing was "
                        "restored."
                    )


def check_scheduler_values(
    scheduler: Any, state: Mapping[str, Any], name: str, input_dir: str
) -> None:
    """Refuse a saved scheduler state whose numeric fields are not numbers.

    Raises:
        CheckpointIntegrityError: naming the file, the key, the value and the fix.
    """
    try:
        mine = scheduler.state_dict()
    except Exception:
        return  # an object that cannot describe itself: its own load_state_dict judges
    if not isinstance(mine, Mapping):
        return
    for key, value in state.items():
        if key in mine:
            _check_number(value, mine[key], repr(key), name, input_dir)


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, torch.Tensor):
        return value.numel() == 1 and not value.dtype.is_complex
    return isinstance(value, numbers.Real)


def _check_number(value: Any, current: Any, where: str, name: str, input_dir: str) -> None:
    """``value`` must be a number where ``current`` (the object's own value) is one, and a
    list of as many numbers where ``current`` is a list or tuple of numbers."""
    if _is_number(current):
        ok = _is_number(value)
        kind = "a number"
    elif (
        isinstance(current, (list, tuple)) and current and all(_is_number(item) for item in current)
    ):
        ok = isinstance(value, (list, tuple)) and len(value) == len(current)
        ok = ok and all(_is_number(item) for item in value)
        kind = f"a list of {len(current)} numbers"
    else:
        return
    if not ok:
        raise CheckpointIntegrityError(
            f"{name} of checkpoint {input_dir!r}: {where} must be {kind}, as in the object it "
            f"loads into (now {current!r}); the file holds {value!r}. The file was altered or "
            "written by other code: load an earlier checkpoint, or fix that value in the "
            "file. Nothing was restored."
        )
