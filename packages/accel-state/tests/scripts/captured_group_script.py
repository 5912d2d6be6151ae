"""2 processes import a torch module that captures the default group after it exists, then tear
down: the group's gloo threads must be gone (they abort the interpreter when left to exit)."""

import os

import torch
import torch.distributed as dist

from accel_state import PartialState
from accel_state._process._teardown import teardown_process_group


def gloo_threads() -> list[str]:
    names = (
        open(f"/proc/self/task/{task}/comm").read().strip()
        for task in os.listdir("/proc/self/task")
    )
    return [name for name in names if "gloo" in name]


state = PartialState()
import torch.distributed.nn.functional as dist_functional  # noqa: E402  (after the group exists)

assert dist_functional.broadcast.__defaults__[-1] is dist.group.WORLD
dist.all_reduce(torch.ones(4))
print(f"RANK {state.process_index} THREADS BEFORE {gloo_threads()}", flush=True)
teardown_process_group()
assert dist_functional.broadcast.__defaults__[-1] is None
print(f"RANK {state.process_index} THREADS AFTER {gloo_threads()}", flush=True)
