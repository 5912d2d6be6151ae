"""capture_rng_state / restore_rng_state: every generator comes back, and the state survives a
``torch.load(weights_only=True)`` round trip (what a checkpoint does with it)."""

from __future__ import annotations

import random

import numpy as np
import torch

from accel_state import capture_rng_state, restore_rng_state


def _draw() -> tuple[float, float, float, float]:
    return random.random(), float(np.random.rand()), float(np.random.randn()), float(torch.rand(1))


def test_states_come_back_through_a_safe_file(tmp_path) -> None:
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    np.random.randn()  # leaves a cached gaussian in numpy's state
    state = capture_rng_state()
    expected = _draw()
    path = tmp_path / "rng.pkl"
    torch.save(state, path)
    loaded = torch.load(path, weights_only=True)
    _draw()
    restore_rng_state(loaded)
    assert _draw() == expected
    # Absent entries leave their generator as it is.
    before = random.getstate()
    restore_rng_state({"torch_manual_seed": loaded["torch_manual_seed"]})
    assert random.getstate() == before and float(torch.rand(1)) == expected[3]
