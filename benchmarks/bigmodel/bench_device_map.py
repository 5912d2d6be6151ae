"""infer_auto_device_map on a ~100k-module mixture-of-experts skeleton and a 70B Llama-like one.

Times accel_bigmodel and the reference library (accelerate) on the same skeleton and budget,
and compares their placements. Prints one JSON object.

Run: uv run --group bench python benchmarks/bigmodel/bench_device_map.py
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

REFERENCE_TIMEOUT = 150.0


def _summary(device_map: dict, sizes: dict) -> dict:
    per_device: dict[str, int] = {}
    for name, device in device_map.items():
        per_device[str(device)] = per_device.get(str(device), 0) + sizes.get(name, 0)
    return {"entries": len(device_map), "bytes_per_device": per_device}


def _run(lib: str, which: str, queue) -> None:
    warnings.filterwarnings("ignore")
    import logging

    logging.disable(logging.WARNING)
    from _models import llama_70b, moe_100k
    from accel_bigmodel import compute_module_sizes, init_empty_weights

    if lib == "accel":
        from accel_bigmodel import infer_auto_device_map
    else:
        from accelerate import infer_auto_device_map

    with init_empty_weights():
        model = moe_100k() if which == "moe" else llama_70b()
    sizes = compute_module_sizes(model, dtype="float16")
    budget = {0: "40GiB", 1: "40GiB", "cpu": "60GiB", "disk": "2000GB"}
    no_split = ["Expert", "Attention"] if which == "moe" else ["DecoderLayer"]
    start = time.perf_counter()
    # The budget names two GPUs this machine may not have: plan for that machine.
    extra = {"check_devices": False} if lib == "accel" else {}
    device_map = infer_auto_device_map(model, dict(budget), no_split, dtype="float16", **extra)
    seconds = time.perf_counter() - start
    result = {
        "seconds": seconds,
        "modules": sum(1 for _ in model.modules()),
        "model_bytes": sizes[""],
        **_summary(device_map, sizes),
    }
    queue.put(result)


def measure(lib: str, which: str) -> dict:
    queue = multiprocessing.get_context("spawn").Queue()
    process = multiprocessing.get_context("spawn").Process(target=_run, args=(lib, which, queue))
    process.start()
    timeout = REFERENCE_TIMEOUT + 90  # + time to build the skeleton
    process.join(timeout)
    if process.is_alive():
        process.kill()
        process.join()
        return {"seconds": None, "timeout": timeout}
    return queue.get() if not queue.empty() else {"seconds": None, "error": "failed"}


def main() -> dict:
    results = {}
    for which in ("llama70b", "moe"):
        results[which] = {lib: measure(lib, which) for lib in ("accel", "accelerate")}
    return results


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
