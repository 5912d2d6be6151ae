"""save_state + load_state of a ~1 GB model (16 fp32 Linear(4096, 4096) layers, 1 process).

Compares accel with the reference library (accelerate) in the same run. Each save and each
load runs in a fresh subprocess, alternating between the two libraries, so peak RSS is per
operation and neither side inherits the other's page cache order. Temporary checkpoints are
deleted. Prints a Markdown table and one JSON object.

Run: uv run --group bench python benchmarks/checkpointing/bench_save_load.py
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

LAYERS = 16
WIDTH = 4096
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))


def _rss() -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _build(library: str, seed: int):
    import torch

    if library == "accel":
        from accel import Accelerator
    else:
        from accelerate import Accelerator
    accelerator = Accelerator(cpu=True)
    torch.manual_seed(seed)
    with torch.no_grad():
        model = torch.nn.Sequential(
            *[torch.nn.Linear(WIDTH, WIDTH, bias=False) for _ in range(LAYERS)]
        )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    return accelerator, model


def worker(library: str, phase: str, folder: str) -> dict[str, float]:
    accelerator, model = _build(library, seed=0 if phase == "save" else 1)
    before = _rss()
    start = time.perf_counter()
    if phase == "save":
        accelerator.save_state(folder)
    else:
        accelerator.load_state(folder)
    seconds = time.perf_counter() - start
    peak = _peak()
    checksum = float(model[0].weight[0, :8].sum())
    return {
        "seconds": seconds,
        "rss_before_gb": before / 1e9,
        "peak_rss_gb": peak / 1e9,
        "peak_increase_gb": max(0, peak - before) / 1e9,
        "checksum": checksum,
    }


def run(library: str, phase: str, folder: str) -> dict[str, float]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, __file__, "--worker", library, phase, folder],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=900,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{library} {phase} failed:\n{out.stdout}\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    results: dict[str, dict[str, list[dict[str, float]]]] = {
        lib: {"save": [], "load": []} for lib in ("accel", "accelerate")
    }
    root = tempfile.mkdtemp(prefix="bench_ckpt_")
    try:
        for _ in range(REPEATS):
            for library in ("accel", "accelerate"):
                folder = os.path.join(root, library)
                shutil.rmtree(folder, ignore_errors=True)
                saved = run(library, "save", folder)
                loaded = run(library, "load", folder)
                if saved["checksum"] != loaded["checksum"]:
                    raise RuntimeError(f"{library}: the loaded weights are not the saved ones")
                results[library]["save"].append(saved)
                results[library]["load"].append(loaded)
                size = sum(
                    os.path.getsize(os.path.join(folder, f))
                    for f in os.listdir(folder)
                    if os.path.isfile(os.path.join(folder, f))
                )
                results[library]["size_gb"] = size / 1e9  # type: ignore[assignment]
                shutil.rmtree(folder)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    summary = {}
    for library, phases in results.items():
        row = {"checkpoint_gb": phases["size_gb"]}
        for phase in ("save", "load"):
            runs = phases[phase]
            row[f"{phase}_s"] = statistics.median(r["seconds"] for r in runs)
            row[f"{phase}_peak_rss_gb"] = statistics.median(r["peak_rss_gb"] for r in runs)
            row[f"{phase}_rss_increase_gb"] = statistics.median(r["peak_increase_gb"] for r in runs)
        summary[library] = row
    print(
        "| library | checkpoint GB | save s | save peak RSS GB (+ over model) "
        "| load s | load peak RSS GB (+ over model) |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for library, row in summary.items():
        print(
            f"| {library} | {row['checkpoint_gb']:.2f} | {row['save_s']:.2f} | "
            f"{row['save_peak_rss_gb']:.2f} (+{row['save_rss_increase_gb']:.2f}) | "
            f"{row['load_s']:.2f} | {row['load_peak_rss_gb']:.2f} "
            f"(+{row['load_rss_increase_gb']:.2f}) |"
        )
    print(json.dumps({"repeats": REPEATS, "summary": summary, "runs": results}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", nargs=3, metavar=("LIBRARY", "PHASE", "FOLDER"))
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker)))
    else:
        main()
