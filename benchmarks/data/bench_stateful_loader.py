"""Overhead of a stateful prepared loader (torchdata's ``StatefulDataLoader`` underneath) over
the plain prepared loader: iteration time per batch and ``state_dict()`` time.

One process; a map-style dataset of 4096 samples (``--samples``) of 256 floats with a light per-sample
augmentation drawn from a worker generator (the dataset has ``state_dict``), batch 32, random
sampler, ``num_workers`` 0 and 2. Each configuration runs whole epochs in turn with the other
(plain, stateful, plain, stateful ...) so that load from other work hits both alike.

The same epochs, alternated with accel's, run the reference library's prepared loaders (plain
and ``use_stateful_dataloader=True``) and the floors with no library (torch's ``DataLoader``
and torchdata's ``StatefulDataLoader``), for a side-by-side table.

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


SIDES = {
    ("accel", False): "accel prepared loader",
    ("accel", True): "accel stateful prepared loader",
    ("reference", False): "accelerate prepared loader (its `state_dict()` raises)",
    ("reference", True): "accelerate stateful prepared loader (`use_stateful_dataloader=True`)",
    ("floor", False): "floor: torch DataLoader, no library (no `state_dict`)",
    ("floor", True): "floor: torchdata StatefulDataLoader, no library",
}
"""(side, stateful) -> row label of the side-by-side table."""


def _loader(num_workers: int, stateful: bool, side: str, samples: int) -> DataLoader:
    if side == "floor" and stateful:
        from torchdata.stateful_dataloader import StatefulDataLoader

        return StatefulDataLoader(
            Augmenting(samples), batch_size=32, shuffle=True, num_workers=num_workers
        )
    base = DataLoader(Augmenting(samples), batch_size=32, shuffle=True, num_workers=num_workers)
    if side == "floor":
        return base
    if side == "reference":
        from accelerate.data_loader import prepare_data_loader as reference_prepare

        return reference_prepare(
            base, num_processes=1, process_index=0, use_stateful_dataloader=stateful
        )
    return prepare_data_loader(
        base, num_processes=1, process_index=0, use_stateful_dataloader=stateful
    )


def _has_state(loader: DataLoader) -> bool:
    """Whether ``state_dict()`` works: a torch ``DataLoader`` has none, and the reference's
    prepared loader that is not stateful has the method but raises ``AttributeError``."""
    try:
        loader.state_dict()  # type: ignore[attr-defined]
    except AttributeError:
        return False
    return True


def _epoch(loader: DataLoader) -> tuple[float, float]:
    """Seconds per batch over one epoch, and seconds per ``state_dict()`` call mid-epoch."""
    start = time.perf_counter()
    count = 0
    for _ in loader:
        count += 1
    per_batch = (time.perf_counter() - start) / count
    batches = iter(loader)
    next(batches)
    per_state = float("nan")  # a loader with no state to take
    if _has_state(loader):
        start = time.perf_counter()
        for _ in range(20):
            loader.state_dict()
        per_state = (time.perf_counter() - start) / 20
    for _ in batches:
        pass
    return per_batch, per_state


def _side_rows(sides: dict[tuple[str, bool], dict[int, tuple[float, float]]]) -> list[str]:
    """One row per loader: us per batch and × floor for each worker count, then state_dict."""
    rows = []
    for (side, stateful), label in SIDES.items():
        cells = [label]
        for workers in (0, 2):
            per_batch = sides[side, stateful][workers][0]
            floor = sides["floor", stateful][workers][0]
            cells += [f"{per_batch:.0f}", f"{per_batch / floor:.2f}"]
        for workers in (0, 2):
            state = sides[side, stateful][workers][1]
            cells.append("-" if state != state else f"{state:.1f}")  # NaN: no state_dict
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--samples", type=int, default=4096, help="samples of the dataset")
    args = parser.parse_args()
    torch.set_num_threads(1)
    load_start = os.getloadavg()
    import torchdata

    rows = []
    sides: dict[tuple[str, bool], dict[int, tuple[float, float]]] = {key: {} for key in SIDES}
    for workers in (0, 2):
        loaders = {key: _loader(workers, key[1], key[0], args.samples) for key in SIDES}
        for loader in loaders.values():
            _epoch(loader)  # warm-up (worker start-up, caches)
        results: dict[tuple[str, bool], list[tuple[float, float]]] = {k: [] for k in SIDES}
        for _ in range(args.epochs):
            for key, loader in loaders.items():
                results[key].append(_epoch(loader))
        for key, measured in results.items():
            sides[key][workers] = (
                statistics.median(r[0] for r in measured) * 1e6,
                statistics.median(r[1] for r in measured) * 1e6,
            )
        plain_batch, plain_state = sides["accel", False][workers]
        stateful_batch, stateful_state = sides["accel", True][workers]
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
            f"{args.samples} samples x 256 floats with per-sample noise from a worker generator "
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
            "",
            "## Side by side: accel, the reference and the floor",
            "",
            "The same epochs, alternated with the rows above. × floor: against the floor of "
            "the same kind (a stateful loader against torchdata's `StatefulDataLoader`, the "
            "others against torch's `DataLoader`).",
            "",
            "| loader | 0 workers (us/batch) | × floor | 2 workers (us/batch) | × floor "
            "| state_dict, 0 workers (us) | state_dict, 2 workers (us) |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
            *_side_rows(sides),
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
