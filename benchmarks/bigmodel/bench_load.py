"""Load a ~2 GB sharded safetensors checkpoint into a meta model, all in RAM and half on disk.

Compares accel_bigmodel with the reference library (accelerate) side by side; each measurement
runs in a fresh subprocess (peak RSS is per process). Prints one JSON object.

Run: uv run --group bench python benchmarks/bigmodel/bench_load.py
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from _workers import run_worker_process  # noqa: E402  (benchmarks/_workers.py)

TOKENS = 8
REPEATS = 3
FORWARDS = 5
# One intra-op thread: on a shared 2-CPU machine a second thread waits for the busier core, which
# made forwards 2-3x slower and far noisier than the difference being measured.
THREADS = 1


def _rss_now() -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def write_checkpoint(folder: str) -> list[str]:
    import torch
    from _models import bench_model
    from accel_bigmodel import SAFE_WEIGHTS_INDEX_NAME, init_empty_weights, shard_checkpoint
    from safetensors.torch import save_file

    with init_empty_weights():
        model = bench_model()
    generator = torch.Generator().manual_seed(0)
    meta = {k: v for k, v in model.state_dict().items()}
    shards, index = shard_checkpoint(meta, "600MB", weights_name="model.safetensors")
    for file_name, shard in shards.items():
        tensors = {k: (torch.randn(v.shape, generator=generator) * 0.02) for k, v in shard.items()}
        save_file(tensors, os.path.join(folder, file_name), metadata={"format": "pt"})
        del tensors
    with open(os.path.join(folder, SAFE_WEIGHTS_INDEX_NAME), "w") as handle:
        json.dump(index, handle)
    return [os.path.join(folder, f) for f in shards]


def cat_seconds(files: list[str]) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        subprocess.run(["cat", *files], stdout=subprocess.DEVNULL, check=True)
        best = min(best, time.perf_counter() - start)
    return best


def worker(lib: str, mode: str, checkpoint: str, offload: str) -> dict:
    import torch

    torch.set_num_threads(THREADS)
    from _models import bench_model

    if lib == "accel":
        from accel_bigmodel import (
            compute_module_sizes,
            init_empty_weights,
            load_checkpoint_and_dispatch,
        )
    else:
        from accelerate import init_empty_weights, load_checkpoint_and_dispatch
        from accelerate.utils import compute_module_sizes

    with init_empty_weights():
        model = bench_model()
    model.eval()
    base_rss = _rss_now()
    kwargs: dict = {}
    if mode == "disk":
        half = compute_module_sizes(model)[""] // 2
        kwargs = {"max_memory": {"cpu": half, "disk": 10**12}, "offload_folder": offload}
    else:
        kwargs = {"max_memory": {"cpu": 10**11}}
    if mode == "ramcopy":
        kwargs["mmap"] = False
    start = time.perf_counter()
    model = load_checkpoint_and_dispatch(
        model,
        checkpoint,
        # The reference's "auto" crashes on a max_memory with a "disk" key (get_balanced_memory
        # calls torch.device("disk")); "sequential" is the same placement on a CPU-only machine.
        device_map="sequential" if mode == "disk" else "auto",
        no_split_module_classes=["DecoderLayer"],
        **kwargs,
    )
    load_seconds = time.perf_counter() - start
    result = {
        "load_seconds": load_seconds,
        "peak_rss": _peak_rss(),
        "base_rss": base_rss,
        "rss_after": _rss_now(),
        "disk_modules": sum(1 for v in model.hf_device_map.values() if v == "disk"),
    }
    ids = torch.randint(0, 32000, (1, TOKENS), generator=torch.Generator().manual_seed(0))
    times = []
    with torch.no_grad():
        for _ in range(FORWARDS):
            start = time.perf_counter()
            out = model(ids)
            times.append(time.perf_counter() - start)
    result["forward_first"] = times[0]
    result["forward_warm"] = min(times[1:])
    result["checksum"] = float(out.double().sum())
    if lib == "accel" and mode == "ram":
        result["mapped_vs_private"] = mapped_vs_private(model, ids)
    if mode == "disk":
        with init_empty_weights():
            twin = bench_model()
        twin.eval()
        twin = load_checkpoint_and_dispatch(
            twin, checkpoint, device_map="auto", max_memory={"cpu": 10**11}
        )
        result["disk_vs_ram"] = alternated({"disk": model, "ram": twin}, ids)
    return result


def alternated(models: dict, ids) -> dict:
    """Median warm forward of each model, their forwards alternated in one process (so that
    the load of a shared machine weighs on all of them alike)."""
    import torch

    times: dict[str, list[float]] = {name: [] for name in models}
    with torch.no_grad():
        for model in models.values():
            model(ids)  # first touch
        for _ in range(FORWARDS):
            for name, model in models.items():
                start = time.perf_counter()
                model(ids)
                times[name].append(time.perf_counter() - start)
    return {name: sorted(values)[len(values) // 2] for name, values in times.items()}


def mapped_vs_private(model, ids) -> dict:
    """Warm forwards of the memory-mapped model and of a private copy, alternated in one process.

    Rows of the table run minutes apart in separate processes, so the load of a shared machine
    can differ between them; alternating the two models here compares them under the same load.
    """
    import copy

    private = copy.deepcopy(model)  # copies every tensor into fresh private memory
    return alternated({"mapped": model, "private": private}, ids)


def run_worker(lib: str, mode: str, checkpoint: str, files: list[str]) -> dict:
    subprocess.run(["cat", *files], stdout=subprocess.DEVNULL, check=True)  # warm page cache
    offload = tempfile.mkdtemp(prefix="bench-offload-")
    try:
        done = run_worker_process(
            __file__, "--worker", lib, mode, checkpoint, offload, env={"ACCEL_BIGMODEL_QUIET": "1"}
        )
    finally:
        shutil.rmtree(offload, ignore_errors=True)
    if done.returncode != 0:
        return {"error": done.error_line(default="failed")}
    return done.result()


def main() -> dict:
    root = tempfile.mkdtemp(prefix="bench-ckpt-")
    try:
        files = write_checkpoint(root)
        os.sync()  # write-back of the new files would otherwise overlap the first rows
        size = sum(os.path.getsize(f) for f in files)
        cat = cat_seconds(files)
        results = {"checkpoint_bytes": size, "cat_seconds": cat, "runs": {}}
        for mode in ("ram", "ramcopy", "disk"):
            for lib in ("accel", "accelerate"):
                if mode == "ramcopy" and lib == "accelerate":
                    continue  # the reference has no such option
                results["runs"][f"{lib}/{mode}"] = run_worker(lib, mode, root, files)
        return results
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        print(json.dumps(worker(*sys.argv[2:6])))
    else:
        parser = argparse.ArgumentParser(description=__doc__)
        parser.parse_args()
        print(json.dumps(main(), indent=2))
