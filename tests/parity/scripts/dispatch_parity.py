"""Run under torchrun: dispatched loaders of accel and of the reference library over the same
data, compared batch by batch on every rank. Prints one summary line per rank and one line per
difference."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import accel_data
import accelerate
import accelerate.data_loader as reference
import torch
from accel_state import PartialState
from torch.utils.data import DataLoader, IterableDataset


class Stream(IterableDataset):
    def __init__(self, length: int) -> None:
        self.length = length

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.length))


def _loader(kind: str, length: int, batch_size: int, drop: bool) -> DataLoader:
    data = list(range(length)) if kind == "map" else Stream(length)
    return DataLoader(data, batch_size=batch_size, drop_last=drop)


def _walk(loader: Any) -> list[tuple[list[int], bool]]:
    return [(batch.tolist(), bool(loader.end_of_dataloader)) for batch in loader]


def main() -> None:
    ours_state = PartialState()
    accelerate.PartialState(cpu=True)
    n, rank = ours_state.num_processes, ours_state.process_index
    compared = 0
    for kind, length, batch_size, split, drop in itertools.product(
        ("map", "stream"), range(1, 14), (1, 2, 3, 4), (False, True), (False, True)
    ):
        if split and batch_size % n:
            continue
        if length < (batch_size if split else batch_size * n):
            continue  # the reference fails on data shorter than one step (migration-data.md)

        kwargs = {"device": torch.device("cpu"), "put_on_device": True, "split_batches": split}
        theirs = reference.prepare_data_loader(
            _loader(kind, length, batch_size, drop), dispatch_batches=True, **kwargs
        )
        ours = accel_data.prepare_data_loader(
            _loader(kind, length, batch_size, drop), dispatch_batches=True, **kwargs
        )
        their_walk, our_walk = _walk(theirs), _walk(ours)
        case = f"{kind} length={length} batch_size={batch_size} split={split} drop={drop}"
        if our_walk != their_walk:
            print(f"rank {rank}: DIFF {case}: {our_walk} != {their_walk}")
        if kind == "map" and len(ours) != len(theirs):
            print(f"rank {rank}: DIFF len {case}: {len(ours)} != {len(theirs)}")
        if our_walk and ours.remainder != theirs.remainder:
            print(f"rank {rank}: DIFF remainder {case}: {ours.remainder} != {theirs.remainder}")
        compared += 1
    print(f"rank {rank}: {compared} dispatch cases compared on {n} processes")


if __name__ == "__main__":
    main()
