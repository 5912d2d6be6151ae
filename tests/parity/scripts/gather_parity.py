"""Run under torchrun: ``gather_for_metrics`` of accel and of the reference library over the
same prepared loaders (66 samples, batch size 8, a stream without a length and a map-style
list), on per-sample rows, on a per-batch value repeated to the batch size (how transformers'
``Trainer`` gathers its evaluation losses) and on objects. Prints one summary line per rank and
one line per difference."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import accel_data
import accelerate
import accelerate.data_loader as reference
import torch
from accel_state import PartialState
from torch.utils.data import DataLoader, IterableDataset


class Stream(IterableDataset):
    """``range(length)`` as a stream without a length."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.length))


def _results(loader: Any, gather: Any) -> list[Any]:
    out: list[Any] = []
    for batch in loader:
        values = batch.float()
        out.append(gather(batch).tolist())
        out.append(gather(values.mean().repeat(8)).tolist())  # the Trainer's losses
        out.append(gather([int(v) for v in batch], use_gather_object=True))
    return out


def main() -> None:
    ours_state = PartialState()
    theirs = accelerate.Accelerator(cpu=True)
    rank = ours_state.process_index
    compared = 0
    for kind in ("stream", "map"):
        for dispatch in (None, False):
            if kind == "stream" and dispatch is False:
                continue  # migration-data.md "remainder and gather_for_metrics": no duplicate kept
            kwargs = {"device": torch.device("cpu"), "put_on_device": True}
            kwargs["dispatch_batches"] = dispatch
            data = (lambda: Stream(66)) if kind == "stream" else (lambda: list(range(66)))
            their_loader = reference.prepare_data_loader(DataLoader(data(), batch_size=8), **kwargs)
            our_loader = accel_data.prepare_data_loader(DataLoader(data(), batch_size=8), **kwargs)
            their = _results(their_loader, theirs.gather_for_metrics)
            ours = _results(our_loader, accel_data.gather_for_metrics)
            if ours != their:
                print(f"rank {rank}: DIFF {kind} dispatch={dispatch}: {ours} != {their}")
            compared += 1

    print(f"rank {rank}: {compared} gather cases compared", flush=True)


if __name__ == "__main__":
    main()
