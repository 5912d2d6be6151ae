"""init_empty_weights on a 70B Llama-like skeleton vs building under torch.device("meta").

Prints one JSON object (best of 3 per variant, in this process).

Run: uv run --group bench python benchmarks/bigmodel/bench_init_empty.py
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def best_of(build, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        model = build()
        best = min(best, time.perf_counter() - start)
        del model
    return best


def main() -> dict:
    import torch
    from _models import llama_70b
    from accel_bigmodel import init_empty_weights
    from accelerate import init_empty_weights as reference_init_empty_weights

    def ours():
        with init_empty_weights():
            return llama_70b()

    def reference():
        with reference_init_empty_weights():
            return llama_70b()

    def meta_device():
        with torch.device("meta"):
            return llama_70b()

    meta_device()  # warm up imports and lazy initialisation paths once
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result = {
        "params": sum(p.numel() for p in ours().parameters()),
        "accel_seconds": best_of(ours),
        "accelerate_seconds": best_of(reference),
        "meta_device_seconds": best_of(meta_device),
    }
    result["peak_rss_growth"] = (
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss_before
    )
    return result


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
