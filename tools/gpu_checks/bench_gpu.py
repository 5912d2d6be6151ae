"""GPU benchmarks: accel, the reference library and the floor side by side, in one call.

0. floors: the checkpoint read from the page cache into page-locked buffers by 1 thread,
   accel's thread count and twice that, and from the disk after an eviction;
1. load: a multi-GB bf16 checkpoint (sharded safetensors, in the page cache) onto the GPU,
   against the measured host-to-device copy of the same bytes (page-locked and pageable) and
   its read from the page cache (the floor is the larger: the two overlap);
2. offload: a forward with a third of the layers on the GPU, a third on the CPU and a third on
   disk (accel with and without its CPU third page-locked), against the largest of the
   page-locked copy of the offloaded bytes, the read of the disk third from the page cache and
   the forward of the whole model on the GPU;
3. train: a bf16 training step (AdamW), against the same loop in plain torch;
and the peak GPU memory of each. Every measurement runs in its own process under a timeout,
so one hang costs one figure. ``--dry-run`` runs the same code on the CPU at tiny sizes (the
figures mean nothing; the GPU-only ones are listed as skipped).

Usage: python tools/gpu_checks/bench_gpu.py --json OUT.json [--dry-run] [--budget SECONDS]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "benchmarks" / "bigmodel"))

GPU_SIZES: dict[str, Any] = {
    # 9 layers of width 4096 and MLP 11008, vocabulary 32000: 2.08e9 parameters, 4.2 GB in bf16.
    "model": {"vocab": 32000, "width": 4096, "hidden": 11008, "layers": 9},
    # 4 layers of width 2048: 3.3e8 parameters (5.3 GB with fp32 weights and AdamW moments).
    "train_model": {"vocab": 32000, "width": 2048, "hidden": 5504, "layers": 4},
    "batch": 8,
    "tokens": 512,
    "train_steps": 12,
    "shard": "1GB",
    "evict_pause": 2,
}
DRY_SIZES: dict[str, Any] = {
    "model": {"vocab": 256, "width": 64, "hidden": 128, "layers": 6},
    "train_model": {"vocab": 256, "width": 64, "hidden": 128, "layers": 2},
    "batch": 2,
    "tokens": 16,
    "train_steps": 4,
    "shard": "100KB",
}
SIDES = ("accel", "reference", "floor")
PARTS: dict[str, tuple[int, tuple[str, ...]]] = {
    "floors": (90, ("floor",)),
    "load": (75, ("accel", "accel_more_threads", "reference", "floor")),
    "offload": (90, ("accel", "accel_pinned", "reference", "floor")),
    "train": (60, SIDES),
}
"""Each part's timeout per process, in seconds (the dry run runs them all in its own process),
and its sides (``accel_pinned``: accel with ``pin_offloaded_weights``; ``accel_more_threads``:
accel's loader with twice its default reader threads)."""


def write_checkpoint(folder: Path, settings: dict[str, Any]) -> int:
    """A sharded bf16 safetensors checkpoint of the model; returns its size in bytes."""
    import torch
    from _models import LlamaLike
    from accel_bigmodel import SAFE_WEIGHTS_INDEX_NAME, init_empty_weights, shard_checkpoint
    from safetensors.torch import save_file

    with init_empty_weights():
        model = LlamaLike(**settings["model"])
    meta = {k: v.to(torch.bfloat16) for k, v in model.state_dict().items()}
    shards, index = shard_checkpoint(meta, settings["shard"], weights_name="model.safetensors")
    generator = torch.Generator().manual_seed(0)
    for name, shard in shards.items():
        tensors = {
            k: torch.empty(v.shape, dtype=torch.bfloat16).normal_(0, 0.02, generator=generator)
            for k, v in shard.items()
        }
        save_file(tensors, str(folder / name), metadata={"format": "pt"})
    (folder / SAFE_WEIGHTS_INDEX_NAME).write_text(json.dumps(index), encoding="utf-8")
    return sum(f.stat().st_size for f in folder.glob("*.safetensors"))


def run_in_process(part: str, side: str, settings: dict[str, Any]) -> dict[str, Any]:
    """One measurement in this process (the dry run: one import of torch for all of them)."""
    import torch

    sys.path.insert(0, str(HERE))
    import _bench_workers

    try:
        return _bench_workers.PARTS[part](side, settings, torch.device(settings["device"]))
    except Exception as exc:
        import traceback

        traceback.print_exc()
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}


def run_side(part: str, side: str, settings: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One measurement in a fresh process; an error or a timeout becomes the figure's text."""
    command = [sys.executable, str(HERE / "_bench_workers.py"), part, side, json.dumps(settings)]
    start = time.perf_counter()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or [f"exited with {proc.returncode}"]
        sys.stderr.write(proc.stderr[-3000:])
        return {"error": lines[-1][:300]}
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["process_seconds"] = time.perf_counter() - start
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", type=Path, required=True, help="results file")
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes on the CPU")
    parser.add_argument("--budget", type=float, default=300, help="seconds for all parts")
    args = parser.parse_args()
    import torch

    cuda = torch.cuda.is_available() and not args.dry_run
    if not cuda:
        print("bench: SKIPPED on the GPU: no CUDA device (dry run): tiny sizes on the CPU")
    settings = dict(GPU_SIZES if cuda else DRY_SIZES)
    settings["device"] = "cuda" if cuda else "cpu"
    deadline = time.monotonic() + args.budget
    have_reference = shutil.which(sys.executable) and _importable("accelerate")
    results: dict[str, Any] = {"settings": settings, "parts": {}}
    work = Path(tempfile.mkdtemp(prefix="accel-gpu-bench-"))
    try:
        checkpoint = work / "checkpoint"
        checkpoint.mkdir()
        start = time.perf_counter()
        settings["checkpoint_bytes"] = write_checkpoint(checkpoint, settings)
        settings["checkpoint"], settings["work"] = str(checkpoint), str(work)
        print(
            f"bench: checkpoint of {settings['checkpoint_bytes'] / 1e9:.2f} GB written in "
            f"{time.perf_counter() - start:.1f} s"
        )
        for part, (limit, sides) in PARTS.items():
            results["parts"][part] = {}
            for side in sides:
                left = deadline - time.monotonic()
                if side == "reference" and not have_reference:
                    figure = {"skipped": "the reference library (accelerate) is not installed"}
                elif left < 5:
                    figure = {"skipped": f"the benchmarks' budget of {args.budget:.0f} s is spent"}
                elif not cuda:
                    figure = run_in_process(part, side, settings)
                else:
                    figure = run_side(part, side, settings, min(limit, left))
                results["parts"][part][side] = figure
                print(f"bench: {part:<8} {side:<10} {json.dumps(figure)}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    failed = [
        f"{p}/{s}"
        for p, sides in results["parts"].items()
        for s, f in sides.items()
        if "error" in f
    ]
    if failed:
        print(f"bench: FAILED: {', '.join(failed)}", file=sys.stderr)
        raise SystemExit(1)


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


if __name__ == "__main__":
    os.environ.setdefault("ACCEL_BIGMODEL_QUIET", "1")
    main()
