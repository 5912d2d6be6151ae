"""Smoke run of accel-state installed alone: the state of one process, seeding, and the
environment contract the launcher writes.

Run: ``python tools/smoke/accel-state.py`` (prints ``ok: accel-state`` on success).
"""

from __future__ import annotations

import random

import numpy as np
import torch
from accel_state import (
    DistributedType,
    PartialState,
    get_int_from_env,
    parse_flag_from_env,
    patch_environment,
    set_seed,
)


def draw() -> tuple[float, float, list[float]]:
    return random.random(), float(np.random.rand()), torch.rand(3).tolist()


def main() -> None:
    state = PartialState(cpu=True)
    assert state.num_processes == 1 and state.process_index == 0, state
    assert state.is_main_process and state.is_local_main_process
    assert state.distributed_type == DistributedType.NO, state.distributed_type
    assert state.device == torch.device("cpu"), state.device
    with state.split_between_processes([1, 2, 3]) as mine:
        assert mine == [1, 2, 3], mine

    set_seed(1234)
    first = draw()
    set_seed(1234)
    assert draw() == first, "set_seed must make python, numpy and torch draws repeat"

    with patch_environment(ACCEL_SMOKE_FLAG="yes", ACCEL_SMOKE_INT="7"):
        assert parse_flag_from_env("ACCEL_SMOKE_FLAG") is True
        assert get_int_from_env(["ACCEL_SMOKE_INT"], 0) == 7
    print("ok: accel-state")


if __name__ == "__main__":
    main()
