"""One training step of a 45 M-parameter Llama-shaped model: torchao float8 vs bf16 autocast,
through accel's Accelerator and the reference library's, each in a fresh subprocess.

Two floors run the same steps with no library: bf16 ``torch.autocast`` around the forward,
written by hand, and the same with torchao's ``convert_to_float8_training`` called by hand (the
first and last linear layers kept in high precision, as the libraries do by default).

Prints one JSON object: median step time over the timed steps, the loss after the last step,
and which layers run in float8. ``--steps`` (timed steps), ``--layers`` and ``--width`` size the
run; ``--out PAGE`` also writes a table into its own section of that page
(``benchmarks/results/precision.md``), keeping the rest.

Run: uv run --group bench python benchmarks/precision/bench_fp8_step.py
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from _workers import run_worker_process  # noqa: E402  (benchmarks/_workers.py)

VARIANTS = [
    "accel-bf16",
    "accel-fp8",
    "reference-bf16",
    "reference-fp8",
    "floor-bf16",
    "floor-fp8",
]
NAMES = {
    "floor-bf16": "floor: hand-written torch bf16 autocast",
    "floor-fp8": "floor: hand-written torchao convert_to_float8_training + bf16 autocast",
}
WARMUP, STEPS = 2, 6


def child(variant: str, steps: int = STEPS, layers: int = 4, width: int = 1024) -> dict:
    import torch
    from _model import training_model

    torch.set_num_threads(2)
    side, precision = variant.split("-")
    torch.manual_seed(0)
    if side == "floor":
        model, optimizer, forward, backward = _floor(training_model(layers, width), precision)
    else:
        if side == "accel":
            from accel import Accelerator
        else:
            from accelerate import Accelerator
        accelerator = Accelerator(mixed_precision=precision, cpu=True)
        torch.manual_seed(0)
        model = training_model(layers, width)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        model, optimizer = accelerator.prepare(model, optimizer)
        forward, backward = model, accelerator.backward
    float8 = sorted({type(m).__name__ for m in model.modules() if "Float8" in type(m).__name__})
    converted = sum(1 for m in model.modules() if "Float8" in type(m).__name__)
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 4096, (4, 128), generator=generator)
    times, loss = [], None
    for step in range(WARMUP + steps):
        start = time.perf_counter()
        logits = forward(ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, 4096).float(), ids[:, 1:].reshape(-1)
        )
        backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        if step >= WARMUP:
            times.append(time.perf_counter() - start)
    return {
        "step_s": round(statistics.median(times), 3),
        "loss_after": round(float(loss), 4),
        "float8_layers": converted,
        "float8_classes": float8,
    }


def _floor(model: Any, precision: str) -> tuple[Any, Any, Any, Any]:
    """The same step with no library: model, optimizer, forward and backward by hand."""
    import torch

    if precision == "fp8":
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training

        linears = [name for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
        keep = {linears[0], linears[-1]}
        convert_to_float8_training(
            model,
            module_filter_fn=lambda module, fqn: fqn not in keep,
            config=Float8LinearConfig(enable_fsdp_float8_all_gather=False),
        )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def forward(ids: Any) -> Any:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return model(ids)

    return model, optimizer, forward, lambda loss: loss.backward()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child")
    parser.add_argument("--only", nargs="*", default=VARIANTS)
    parser.add_argument("--steps", type=int, default=STEPS, help="timed steps after the warm-up")
    parser.add_argument("--layers", type=int, default=4, help="decoder blocks of the model")
    parser.add_argument("--width", type=int, default=1024, help="width of the model")
    parser.add_argument("--out", default=None, help="page to write the table into")
    args = parser.parse_args()
    sizes = ["--steps", str(args.steps), "--layers", str(args.layers), "--width", str(args.width)]
    if args.child:
        try:
            result = child(args.child, args.steps, args.layers, args.width)
        except Exception as error:  # the reference may refuse the CPU: record its exact error
            result = {
                "error": f"{type(error).__name__}: {error}",
                "where": traceback.format_exc(limit=-2),
            }
        print("RESULT " + json.dumps(result), flush=True)
        return
    results = {}
    for variant in args.only:
        run = run_worker_process(
            __file__, "--child", variant, *sizes, timeout=900, marker="RESULT "
        )
        found = run.result()
        results[variant] = found if found is not None else {"error": run.stderr[-2000:]}
        print(variant, results[variant], file=sys.stderr, flush=True)
    print(json.dumps(results, indent=2))
    if args.out is not None:
        _write_section(args, results)


def _write_section(args: argparse.Namespace, results: dict) -> None:
    """accel and the reference side by side, one row per variant, in the page's section."""
    sys.path.insert(0, str(Path(HERE).parent))
    from _machine import write_section  # benchmarks/_machine.py

    lines = [
        f"## Latest run of `bench_fp8_step.py` ({args.layers} blocks of width {args.width}, "
        f"median of {args.steps} steps after {WARMUP} warm-up)",
        "",
        "| variant | step s | × floor | loss after | float8 layers |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for variant, result in results.items():
        name = NAMES.get(variant, variant.replace("-", " "))
        if "error" in result:
            error = result["error"].strip().splitlines()[0][:120].replace("|", "/")
            lines.append(f"| {name} | error: {error} | | | |")
            continue
        floor = results.get(f"floor-{variant.split('-')[1]}", {}).get("step_s")
        ratio = f"{result['step_s'] / floor:.2f}x" if floor else ""
        lines.append(
            f"| {name} | {result['step_s']} | {ratio} | {result['loss_after']} "
            f"| {result['float8_layers']} |"
        )
    write_section(args.out, "bench_fp8_step", "accel-precision benchmarks", "\n".join(lines))


if __name__ == "__main__":
    main()
