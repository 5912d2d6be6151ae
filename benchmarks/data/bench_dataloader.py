"""Throughput of a prepared DataLoader against the raw DataLoader, and against the reference
library's ``prepare_data_loader`` in the same run.

Throughput is samples per CPU-second of each process (best epoch of every round), so that other
work on a shared machine does not count; with 2 processes the raw baseline is a DataLoader with
a ``DistributedSampler`` and the table shows process 0.

Single process:   uv run python benchmarks/data/bench_dataloader.py
Two processes:    uv run python benchmarks/data/bench_dataloader.py --processes 2
(the second form starts itself under torchrun). Install the reference library with
``uv sync --all-packages --group bench``; without it its column reads "n/a".
``--out PAGE`` also writes the row, under its table header, into its own section of that page
(one section per process count, in ``benchmarks/results/data.md``), keeping the rest.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def make_loader(n: int, features: int, batch_size: int, distributed: bool) -> DataLoader:
    generator = torch.Generator().manual_seed(0)
    data = TensorDataset(
        torch.randn(n, features, generator=generator),
        torch.randint(0, 10, (n,), generator=generator),
    )
    if distributed:
        return DataLoader(data, batch_size=batch_size, sampler=DistributedSampler(data, seed=0))
    return DataLoader(data, batch_size=batch_size, shuffle=True)


def samples_per_second(loader, epochs: int) -> float:
    best = 0.0
    for epoch in range(epochs):
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(epoch)
        elif isinstance(getattr(loader, "sampler", None), DistributedSampler):
            loader.sampler.set_epoch(epoch)
        count = 0
        # CPU time of this process: the machine may be shared, and wall-clock time would then
        # measure the neighbours as much as the loader.
        start = time.process_time()
        for x, _ in loader:
            count += x.shape[0]
        best = max(best, count / max(time.process_time() - start, 1e-9))
    return best


def run(args: argparse.Namespace) -> None:
    from accel_data import prepare_data_loader
    from accel_state import PartialState

    state = PartialState()
    n, rank = state.num_processes, state.process_index
    distributed = n > 1
    results: dict[str, float] = {}
    for _ in range(args.rounds):  # interleave the contenders so that noise hits them alike
        raw = make_loader(args.samples, args.features, args.batch_size, distributed)
        results.setdefault("raw", 0.0)
        results["raw"] = max(results["raw"], samples_per_second(raw, args.epochs))
        ours = prepare_data_loader(
            make_loader(args.samples, args.features, args.batch_size, False),
            num_processes=n,
            process_index=rank,
        )
        results.setdefault("accel", 0.0)
        results["accel"] = max(results["accel"], samples_per_second(ours, args.epochs))
        try:
            from accelerate.data_loader import prepare_data_loader as reference_prepare
        except ImportError:
            continue
        reference = reference_prepare(
            make_loader(args.samples, args.features, args.batch_size, False),
            num_processes=n,
            process_index=rank,
            put_on_device=False,
        )
        results.setdefault("accelerate", 0.0)
        results["accelerate"] = max(
            results["accelerate"], samples_per_second(reference, args.epochs)
        )
    if rank == 0:
        raw = results["raw"]
        ref = results.get("accelerate")
        ref_cell = f"{ref:,.0f} ({ref / raw:.3f}x)" if ref else "n/a"
        row = (
            f"| {n} | {args.samples} x {args.features} fp32, batch {args.batch_size} | "
            f"{raw:,.0f} | {results['accel']:,.0f} ({results['accel'] / raw:.3f}x) | {ref_cell} |"
        )
        print(row)
        if args.out is not None:
            _write_section(args, n, results)


def _write_section(args: argparse.Namespace, processes: int, results: dict[str, float]) -> None:
    """The contenders side by side, one row each, in this benchmark's section of the page."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _machine import write_section  # benchmarks/_machine.py

    names = {"raw": "raw DataLoader", "accel": "accel-data", "accelerate": "accelerate"}
    lines = [
        f"## Latest run of `bench_dataloader.py`: {processes} process(es), {args.samples} x "
        f"{args.features} fp32, batch {args.batch_size}, best epoch of {args.rounds} rounds of "
        f"{args.epochs} epochs",
        "",
        "| loader | samples/s (process 0) | vs raw |",
        "| --- | ---: | ---: |",
    ]
    for key, name in names.items():
        if key in results:
            value = results[key]
            lines.append(f"| {name} | {value:,.0f} | {value / results['raw']:.3f}x |")
    write_section(args.out, f"bench_dataloader-{processes}", "accel-data", "\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--samples", type=int, default=32768)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--out", default=None, help="page to write the row into")
    args = parser.parse_args()
    if args.processes > 1 and "LOCAL_RANK" not in os.environ:
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            f"--nproc_per_node={args.processes}",
            "--master_addr=127.0.0.1",
            "--master_port=29611",
            __file__,
            *sys.argv[1:],
        ]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        raise SystemExit(subprocess.call(command, env=env))
    torch.set_num_threads(1)
    run(args)


if __name__ == "__main__":
    main()
