"""Rank 1 raises between two collectives; rank 0 goes on into the next one, which fails when
rank 1's end of the connection closes."""

import torch
import torch.distributed as dist
from accel_state import PartialState


def training_step(rank: int) -> None:
    if rank == 1:
        raise ValueError("bad batch on rank 1")


state = PartialState()
dist.barrier()
training_step(state.process_index)
dist.all_reduce(torch.ones(1))  # rank 0 waits here until rank 1's connection closes
print("NOT REACHED", flush=True)
