"""Rank 1 fails at once; rank 0 would wait a long time in a collective."""

import sys
import time

import torch
import torch.distributed as dist
from accel_state import PartialState

state = PartialState()
if state.process_index == 1:
    print(f"FAILED_AT {time.time()}", file=sys.stderr, flush=True)
    raise RuntimeError("rank 1 failed on purpose")
time.sleep(0.5)
dist.all_reduce(torch.ones(1))  # never completes: its peer is gone
time.sleep(120)
