"""Run on 2 processes: a shuffling DataLoader with the caller's generator, prepared.

The processes seed their generators differently before ``prepare_data_loader``: the shards still
cover the data once per pass (the main process's generator state is copied to the other). Seeded
alike after ``prepare``, the two shards read step by step give the batches of a plain loader of
twice the batch size whose generator has that seed.
"""

from __future__ import annotations

import torch
from accel_state import PartialState
from torch.utils.data import DataLoader

from accel_data import prepare_data_loader

state = PartialState()
rank, world = state.process_index, state.num_processes
assert world == 2, world

generator = torch.Generator()
generator.manual_seed(100 + rank)
prepared = prepare_data_loader(
    DataLoader(list(range(32)), batch_size=4, shuffle=True, generator=generator)
)
parts: list = [None] * world
torch.distributed.all_gather_object(parts, [b.tolist() for b in prepared])
covered = sorted(i for part in parts for batch in part for i in batch)
print(f"rank {rank}: seeded apart: {'ok' if covered == list(range(32)) else f'FAIL {parts}'}")

generator.manual_seed(42)
mine = [b.tolist() for b in prepared]
torch.distributed.all_gather_object(parts, mine)
steps = [a + b for a, b in zip(parts[0], parts[1], strict=True)]
generator.manual_seed(42)
plain = [
    b.tolist() for b in DataLoader(list(range(32)), batch_size=8, shuffle=True, generator=generator)
]
print(f"rank {rank}: reseeded: {'ok' if steps == plain else f'FAIL {steps} != {plain}'}")
