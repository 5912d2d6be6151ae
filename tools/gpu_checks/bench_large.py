"""The large GPU benchmarks, the second call of the GPU check (``tools/gpu_check.sh --large``).

1. llm: a Llama-2-7B-shaped model with random bf16 weights (about 13.5 GB, written once),
   loaded by transformers' ``from_pretrained(device_map="auto")`` and served with greedy
   ``generate``, all on the GPU and with half the layers on the CPU; accel (through
   ``install_as_accelerate``), the reference and the floor, with the tokens compared
   (``_bench_llm.py``);
2. fp8: a hidden-size-4096 decoder trained in bf16 and in FP8 (torchao), eager and compiled,
   accel beside the reference and a plain torch loop (``_bench_fp8.py``).

Every measurement runs in a fresh process under a timeout, inside one budget. ``--dry-run``
runs the same code on the CPU at tiny sizes (FP8 is skipped there, with the reason). The call
fails when a measurement fails or the two libraries generate different tokens.

Usage: python tools/gpu_checks/bench_large.py --json OUT.json [--dry-run] [--budget SECONDS]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

SHARES = {"llm": 0.45, "fp8": 0.55}
"""Each part's share of the budget; what one leaves unused goes to the next."""


def _failures(name: str, results: dict[str, Any]) -> list[str]:
    found = []
    for scenario, sides in results.get("rows", {}).items():
        for side, figure in sides.items():
            if "error" in figure:
                found.append(f"{name}/{scenario}/{side}: {figure['error'][:200]}")
    for scenario, equal in results.get("tokens_equal", {}).items():
        if equal is False:
            found.append(f"{name}/{scenario}: accel and the reference generated different tokens")
    if "error" in results.get("prepare", {}):
        found.append(f"{name}/prepare: {results['prepare']['error'][:200]}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", type=Path, required=True, help="results file")
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes on the CPU")
    parser.add_argument("--budget", type=float, default=280, help="seconds for both parts")
    args = parser.parse_args()
    import _bench_fp8
    import _bench_llm
    import torch

    cuda = torch.cuda.is_available() and not args.dry_run
    if not cuda:
        print("large: SKIPPED on the GPU: no CUDA device (dry run): tiny sizes on the CPU")
    start = time.monotonic()
    deadline = start + args.budget
    results: dict[str, Any] = {}
    failed: list[str] = []
    used = 0.0
    for name, module in (("llm", _bench_llm), ("fp8", _bench_fp8)):
        settings = dict(module.GPU_SIZES if cuda else module.DRY_SIZES)
        settings["device"] = "cuda" if cuda else "cpu"
        used += SHARES[name] * args.budget
        part_deadline = min(deadline, start + used)
        began = time.monotonic()
        part = module.run_all(settings, timeout=part_deadline - began, deadline=part_deadline)
        part["seconds"] = time.monotonic() - began
        results[name] = part
        print(f"large: {name} in {part['seconds']:.0f} s: {json.dumps(part)[:2000]}", flush=True)
        failed += _failures(name, part)
    args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    if failed:
        print("large: FAILED:\n  " + "\n  ".join(failed), file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
