"""Overhead of a stateful prepared loader (torchdata's ``StatefulDataLoader`` underneath) over
the plain prepared loader: iteration time per batch and ``state_dict()`` time.

One process; a map-style dataset of 4096 samples of 256 floats with a light per-sample
augmentation drawn from a worker generator (the dataset has ``state_dict``), batch 32, random
sampler, ``num_workers`` 0 and 2. Each configuration runs whole epochs in turn with the other
(plain, stateful, plain, stateful ...) so that load from other work hits both alike.

Run: uv run --all-packages --group bench python benchmarks/data/bench_stateful_loader.py
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
from accel_data import prepare_data_loader
from torch.utils.data import DataLoader, Dataset, get_worker_info


class Augmenting(Dataset):
    """Features plus noise from a generator each worker seeds and keeps."""

    def __init__(self, size: int = 4096, width: int = 256) -> None:
        self.data = torch.randn(size, width, generator=torch.Generator().manual_seed(0))
        self._generator: torch.Generator | None = None

    def __len__(self) -> int:
        return len(self.data)

    def _rng(self) -> torch.Generator:
        if self._generator is None:
            info = get_worker_info()
            self._generator = torch.Generator().manual_seed(info.seed if info else 0)
        return self._generator

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.data[index] + 0.01 * torch.randn(self.data.shape[1], generator=self._rng())

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"rng": self._rng().get_state()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self._rng().set_state(state["rng"])


def _loader(num_workers: int, stateful: bool) -> DataLoader:
    base = DataLoader(Augmenting(), batch_size=32, shuffle=True, num_workers=num_workers)
    return prepare_data_loader(
        base, num_processes=1, process_index=0, use_stateful_dataloader=stateful
    )


def _epoch(loader: DataLoader) -> tuple[float, float]:
    """Seconds per batch over one epoch, and seconds per ``state_dict()`` call mid-epoch."""
    start = time.perf_counter()
    count = 0
    for _ in loader:
        count += 1
    per_batch = (time.perf_counter() - start) / count
    batches = iter(loader)
    next(batches)
    start = time.perf_counter()
    for _ in range(20):
        loader.state_dict()
    per_state = (time.perf_counter() - start) / 20
    for _ in batches:
        pass
    return per_batch, per_state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    load_start = os.getloadavg()
    import torchdata

    rows = []
    for workers in (0, 2):
        loaders = {flag: _loader(workers, flag) for flag in (False, True)}
        for loader in loaders.values():
            _epoch(loader)  # warm-up (worker start-up, caches)
        results: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        for _ in range(args.epochs):
            for flag, loader in loaders.items():
                results[flag].append(_epoch(loader))
        plain_batch = statistics.median(r[0] for r in results[False]) * 1e6
        stateful_batch = statistics.median(r[0] for r in results[True]) * 1e6
        plain_state = statistics.median(r[1] for r in results[False]) * 1e6
        stateful_state = statistics.median(r[1] for r in results[True]) * 1e6
        rows.append(
            f"| {workers} | {plain_batch:.0f} | {stateful_batch:.0f} | "
            f"{stateful_batch / plain_batch:.2f}x | {plain_state:.1f} | {stateful_state:.1f} |"
        )
    load_end = os.getloadavg()
    text = "\n".join(
        [
            "# Stateful prepared loader vs plain prepared loader (one process)",
            "",
            f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared with other work), "
            f"torch {torch.__version__}, torchdata {torchdata.__version__}, torch threads 1. "
            "4096 samples x 256 floats with per-sample noise from a worker generator "
            "(the dataset has `state_dict`), batch 32, random sampler; "
            f"{args.epochs} epochs per configuration, alternated, after one warm-up epoch; "
            "medians over epochs. Load average (1, 5, 15 min): start "
            f"{', '.join(f'{v:.2f}' for v in load_start)}, end "
            f"{', '.join(f'{v:.2f}' for v in load_end)}.",
            "",
            "The stateful loader captures torchdata's state (sampler position, workers' "
            "snapshots) with every batch it yields; `state_dict()` then only assembles it.",
            "",
            "| num_workers | plain (us/batch) | stateful (us/batch) | ratio | plain "
            "state_dict (us) | stateful state_dict (us) |",
            "| ---: | ---: | ---: | ---: | ---: | ---: |",
            *rows,
        ]
    )
    print(text)
    if args.output is not None:
        args.output.write_text(text + "\n")
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from _charts import write_charts  # benchmarks/_charts.py

        write_charts(args.output)  # one PNG per table, shown under it


if __name__ == "__main__":
    main()
