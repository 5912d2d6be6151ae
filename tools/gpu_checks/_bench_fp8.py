"""FP8 training that pays: torchao's ``Float8Linear`` against bf16 on a model big enough for it.

A decoder stack of width 4096 (``LlamaLike`` of ``benchmarks/bigmodel/_models.py``: 4 blocks
of attention and MLP 11008, 1.07e9 parameters) trains with AdamW on a fixed batch of 4 x 2048
tokens, so the matrix products dominate the step. Each variant runs on each side in a fresh
process:

- variants: ``bf16`` (``mixed_precision="bf16"``), ``fp8`` (``mixed_precision="fp8"`` with
  ``AORecipeKwargs()``: each library's own defaults), each eager and with ``torch.compile``
  (``TorchDynamoPlugin``, the same settings on both sides);
- sides: ``accel``, ``reference`` (the library ``accelerate``), ``floor`` (the same loop in plain
  torch under bf16 autocast, compiled by hand the same way; its FP8 rows, plain torchao, run
  only with ``floor_fp8``).

Both libraries keep the first and the last linear layer in bf16 and convert every other linear
layer (all of their dimensions are multiples of 16), so both convert the same 27 layers; each
row records how many it converted and the class of their weights. The optimizer is built from
the prepared model's parameters: the reference's default FP8 config
(``enable_fsdp_float8_all_gather=True``) gives each converted layer a new weight parameter, so
an optimizer built before ``prepare`` would never update those layers (``untrained_parameters``
counts such elements; ``optimizer_before_prepare`` measures that way).

Figures: tokens per second (median of the steps after the warm-up ones), the losses of every
step, peak GPU memory, the seconds the warm-up steps took beyond a warm step (the compile time
of the compiled variants). Each process compiles into a fresh inductor and Triton cache, so
no side inherits another's kernels.

``python _bench_fp8.py SIDE VARIANT SETTINGS_JSON`` runs one of them in this process and prints
one JSON object on its last stdout line.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from _fp8_page import SIDES, VARIANTS, markdown, parse_variant, speedups

__all__ = ["DRY_SIZES", "GPU_SIZES", "SIDES", "VARIANTS", "markdown", "run", "run_all", "speedups"]

HERE = Path(__file__).resolve().parent
MODELS = HERE.parents[1] / "benchmarks" / "bigmodel"

GPU_SIZES: dict[str, Any] = {
    # 4 blocks of width 4096 and MLP 11008 (every dimension a multiple of 16), vocabulary 32000:
    # 1.07e9 parameters, 17 GB with float32 weights and AdamW moments. One step of 8192 tokens
    # is about 50 TFLOP, 80 % of it in the 27 linear layers FP8 converts.
    "model": {"vocab": 32000, "width": 4096, "hidden": 11008, "layers": 4},
    "batch": 4,
    "tokens": 2048,
    "steps": 10,
    "warmup": 3,
    "lr": 2e-4,
    # "regional": each repeated block compiled on its own (the compiler compiles one block and
    # reuses it for the others: a cold compile is a fraction of the whole model's); "whole":
    # the model as one graph.
    "compile": "regional",
    "compile_backend": "inductor",
    # The plain-torchao floor of the FP8 variants: two more processes (one of them compiles).
    "floor_fp8": False,
    # "library": AORecipeKwargs() as each library builds it; "torchao": both get
    # config=Float8LinearConfig() (torchao's own defaults).
    "fp8_config": "library",
    # Build AdamW before prepare and pass both to it (see the module's docstring).
    "optimizer_before_prepare": False,
    # A process is started only with this much of the budget left (eager, compiled).
    "min_seconds": 12,
    "min_compile_seconds": 30,
}
"""Estimate on one H200: about 8 s an eager process (imports, CUDA context, model on the GPU,
10 steps of 0.1 to 0.2 s), 20 to 25 s a compiled bf16 one and 30 to 40 s a compiled fp8 one
(a cold regional compile of forward and backward: one block graph for bf16, two for fp8, whose
first block keeps its first linear layer in bf16). 5 eager and 5 compiled processes: about
170 s (150 to 200); the floor's rows run last, so a short budget skips them first.
``floor_fp8`` adds two processes (about 45 s)."""

DRY_SIZES: dict[str, Any] = {
    "model": {"vocab": 256, "width": 64, "hidden": 128, "layers": 2},
    "batch": 2,
    "tokens": 32,
    "steps": 5,
    "warmup": 2,
    "lr": 1e-3,
    "compile": "regional",
    "compile_backend": "inductor",
    "floor_fp8": False,
    "fp8_config": "library",
    "optimizer_before_prepare": False,
    "min_seconds": 5,
    "min_compile_seconds": 5,
    # torch.compile on the CPU builds C++ kernels: longer than the whole dry run may take.
    "compile_on_cpu": False,
}


def skip_reason(side: str, variant: str, settings: dict[str, Any]) -> str | None:
    """Why (side, variant) does not run with these settings, known without importing torch;
    None when it runs."""
    if side not in SIDES:
        raise ValueError(f"unknown side {side!r}; expected one of {SIDES}")
    precision, compiled = parse_variant(variant)
    device = settings.get("device", "cpu")
    if precision == "fp8":
        if device != "cuda" and not settings.get("fp8_on_cpu"):
            return (
                "FP8 training (torchao Float8Linear, torch._scaled_mm) needs a CUDA device of "
                f"compute capability >= 8.9; this run is on {device}"
            )
        if side == "floor" and not settings.get("floor_fp8"):
            return "the floor is plain torch in bf16 (floor_fp8 adds a plain-torchao floor)"
        if importlib.util.find_spec("torchao") is None:
            return "torchao is not installed (pip install torchao)"
    if compiled and device == "cpu" and not settings.get("compile_on_cpu"):
        return (
            "torch.compile on the CPU is left out of the dry run: inductor's C++ build takes "
            "longer than the dry run may (compile_on_cpu runs it)"
        )
    if side == "reference" and importlib.util.find_spec("accelerate") is None:
        return "the reference library (accelerate) is not installed"
    return None


# --------------------------------------------------------------------------- one measurement


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _keep_first_last(model: Any) -> Any:
    """The floor's FP8 filter: what both libraries convert by default (every linear layer with
    dimensions multiple of 16 except the first and the last)."""
    import torch

    names = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    kept = {names[0], names[-1]} if names else set()

    def convert(module: torch.nn.Module, fqn: str) -> bool:
        return (
            isinstance(module, torch.nn.Linear)
            and fqn not in kept
            and module.in_features % 16 == 0
            and module.out_features % 16 == 0
        )

    return convert


def _compile_floor(model: Any, settings: dict[str, Any]) -> Any:
    """Plain ``torch.compile``: the whole model, or (regional) each block of its layer list and
    each other child on its own, as the libraries' regional compilation does."""
    import torch

    kwargs = {"backend": settings.get("compile_backend", "inductor")}
    if settings.get("compile", "regional") != "regional":
        return torch.compile(model, **kwargs)
    for name, child in list(model.named_children()):
        if isinstance(child, torch.nn.ModuleList):
            for i, block in enumerate(child):
                child[i] = torch.compile(block, **kwargs)
        else:
            setattr(model, name, torch.compile(child, **kwargs))
    return model


def _library(side: str) -> tuple[Any, Any, Any]:
    if side == "accel":
        from accel import Accelerator
        from accel.utils import AORecipeKwargs, TorchDynamoPlugin
    else:
        from accelerate import Accelerator
        from accelerate.utils import AORecipeKwargs, TorchDynamoPlugin
    return Accelerator, AORecipeKwargs, TorchDynamoPlugin


def _fp8_description(model: Any) -> dict[str, Any]:
    """How many linear layers became ``Float8Linear``, and the class of their weights."""
    import torch

    converted = [m for m in model.modules() if type(m).__name__ == "Float8Linear"]
    linear = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    info: dict[str, Any] = {"fp8_layers": len(converted), "linear_layers": len(linear)}
    if converted:
        info["fp8_weight_class"] = type(converted[0].weight).__name__
        config = getattr(converted[0], "config", None)
        if config is not None:
            info["fp8_config"] = {
                "pad_inner_dim": getattr(config, "pad_inner_dim", None),
                "enable_fsdp_float8_all_gather": getattr(
                    config, "enable_fsdp_float8_all_gather", None
                ),
                "weight_scaling": str(
                    getattr(getattr(config, "cast_config_weight", None), "scaling_granularity", "")
                ),
            }
    return info


def _untrained(model: Any, optimizer: Any) -> int:
    """How many of the model's parameters (elements) no parameter group of the optimizer holds:
    parameters the steps never update."""
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    return sum(p.numel() for p in model.parameters() if id(p) not in held)


def run(side: str, variant: str, settings: dict[str, Any]) -> dict[str, Any]:
    """Train ``settings["steps"]`` steps of ``variant`` on ``side`` in this process."""
    reason = skip_reason(side, variant, settings)
    if reason is not None:
        return {"skipped": reason}
    precision, compiled = parse_variant(variant)
    import torch

    device = torch.device(settings["device"])
    if device.type == "cuda":
        if precision == "fp8" and torch.cuda.get_device_capability(device) < (8, 9):
            capability = torch.cuda.get_device_capability(device)
            return {
                "skipped": f"FP8 needs compute capability >= 8.9; "
                f"{torch.cuda.get_device_name(device)} has {capability}"
            }
        torch.empty(1, device=device)  # the CUDA context, outside every figure
        torch.cuda.reset_peak_memory_stats(device)
    if str(MODELS) not in sys.path:
        sys.path.insert(0, str(MODELS))
    from _models import LlamaLike

    shape = settings["model"]
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaLike(**shape)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, shape["vocab"], (settings["batch"], settings["tokens"] + 1), generator=g)
    ids = ids.to(device)
    inputs, targets = ids[:, :-1], ids[:, 1:].flatten()
    cross_entropy = torch.nn.functional.cross_entropy

    def adamw(parameters: Any) -> torch.optim.Optimizer:
        return torch.optim.AdamW(parameters, lr=settings["lr"])

    start = time.perf_counter()
    if side == "floor":
        if precision == "fp8":
            from torchao.float8 import Float8LinearConfig, convert_to_float8_training

            convert_to_float8_training(
                model, module_filter_fn=_keep_first_last(model), config=Float8LinearConfig()
            )
        plain = model
        optimizer = adamw(model.parameters())
        if compiled:
            model = _compile_floor(model, settings)

        def backward(loss: torch.Tensor) -> None:
            loss.backward()

        def forward() -> torch.Tensor:
            with torch.autocast(device.type, dtype=torch.bfloat16):
                return model(inputs)
    else:
        accelerator_cls, recipe_cls, plugin_cls = _library(side)
        kwargs: dict[str, Any] = {"mixed_precision": precision, "cpu": device.type == "cpu"}
        if precision == "fp8":
            if settings.get("fp8_config", "library") == "torchao":
                from torchao.float8 import Float8LinearConfig

                kwargs["kwargs_handlers"] = [recipe_cls(config=Float8LinearConfig())]
            else:
                kwargs["kwargs_handlers"] = [recipe_cls()]
        if compiled:
            kwargs["dynamo_plugin"] = plugin_cls(
                backend=settings.get("compile_backend", "inductor"),
                mode="default",
                use_regional_compilation=settings.get("compile", "regional") == "regional",
            )
        accelerator = accelerator_cls(**kwargs)
        plain = model
        if settings.get("optimizer_before_prepare"):
            model, optimizer = accelerator.prepare(model, adamw(model.parameters()))
        else:
            model = accelerator.prepare(model)
            optimizer = accelerator.prepare(adamw(model.parameters()))
        backward = accelerator.backward

        def forward() -> torch.Tensor:
            return model(inputs)

    setup_seconds = time.perf_counter() - start
    if compiled:
        torch._dynamo.utils.counters.clear()

    def step() -> float:
        loss = cross_entropy(forward().float().flatten(0, 1), targets)
        backward(loss)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()

    times, losses = [], []
    for _ in range(settings["steps"]):
        _sync(device)
        began = time.perf_counter()
        losses.append(step())
        _sync(device)
        times.append(time.perf_counter() - began)
    warmup = min(settings["warmup"], len(times) - 1)
    warm = statistics.median(times[warmup:])
    result: dict[str, Any] = {
        "tokens_per_second": settings["batch"] * settings["tokens"] / warm,
        "step_seconds": warm,
        "first_step_seconds": times[0],
        "step_times": [round(t, 5) for t in times],
        "losses": [round(loss, 5) for loss in losses],
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "peak_bytes": torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None,
        "setup_seconds": setup_seconds,
        # The warm-up steps' time beyond warm steps: the compile (and first-call) cost.
        "compile_seconds": sum(max(0.0, t - warm) for t in times[:warmup]) if compiled else None,
        "parameters": sum(p.numel() for p in plain.parameters()),
        "untrained_parameters": _untrained(plain, optimizer),
        **_fp8_description(plain),
    }
    if compiled:
        counters = torch._dynamo.utils.counters
        result["graphs"] = counters["stats"].get("unique_graphs", 0)
        result["graph_breaks"] = sum(counters["graph_break"].values())
    if device.type == "cuda":
        result["device_name"] = torch.cuda.get_device_name(device)
    if not all(math.isfinite(loss) for loss in losses):
        result["warning"] = "a loss is not finite"
    return result


# --------------------------------------------------------------------------- all of them


def _environment(settings: dict[str, Any], cache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCEL_", "ACCELERATE_"))}
    env["PYTHONUNBUFFERED"] = "1"
    # A fresh compile cache per process: no side inherits the kernels another built.
    env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")
    env["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")
    if settings.get("device", "cpu") != "cuda":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def _last_error_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if not line.startswith((" ", "\t")) and ("Error" in line or "Exception" in line):
            return line.strip()
    return lines[-1].strip() if lines else ""


def run_one(side: str, variant: str, settings: dict[str, Any], timeout: float) -> dict[str, Any]:
    """(side, variant) in a fresh process under ``timeout`` seconds; an error or a timeout
    becomes ``{"error": text}``."""
    reason = skip_reason(side, variant, settings)
    if reason is not None:
        return {"skipped": reason}
    cache = tempfile.mkdtemp(prefix="accel-bench-fp8-")
    command = [sys.executable, str(Path(__file__).resolve()), side, variant, json.dumps(settings)]
    start = time.perf_counter()
    try:
        proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_environment(settings, cache),
            start_new_session=True,  # its compile workers go with it on a timeout
        )
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return {"error": f"timed out after {timeout:.0f} s"}
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    lines = stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        result = None
    if not isinstance(result, dict):
        sys.stderr.write(stderr[-3000:])
        text = _last_error_line(stderr) or f"exited with {proc.returncode} and no result"
        return {"error": f"{text} (exit {proc.returncode})"[:600]}
    if "error" in result:
        sys.stderr.write(stderr[-3000:])
    result["process_seconds"] = time.perf_counter() - start
    return result


def run_all(settings: dict[str, Any], timeout: float, deadline: float) -> dict[str, Any]:
    """Every variant on every side, each in a fresh process.

    Args:
        settings: ``GPU_SIZES`` or ``DRY_SIZES`` with ``"device"`` set (``"cuda"`` or ``"cpu"``).
        timeout: The most seconds one process may take.
        deadline: ``time.monotonic()`` past which nothing starts; a process starts only with
            ``min_seconds`` (``min_compile_seconds`` when it compiles) left, else it is skipped.

    Returns:
        ``{"settings": settings, "rows": {variant: {side: figures}}}``; figures hold
        ``"error"`` or ``"skipped"`` when the measurement failed or did not run.
    """
    settings = dict(settings)
    settings.setdefault("device", "cpu")
    rows: dict[str, dict[str, Any]] = {variant: {} for variant in VARIANTS}
    # The libraries' rows first, the floor's last: a short budget loses the floor first.
    order = [(v, side) for v in VARIANTS for side in ("accel", "reference")]
    order += [(v, "floor") for v in VARIANTS]
    for variant, side in order:
        compiled = parse_variant(variant)[1]
        needs = settings.get("min_compile_seconds" if compiled else "min_seconds", 10)
        left = deadline - time.monotonic()
        if skip_reason(side, variant, settings) is None and left < needs:
            figure: dict[str, Any] = {
                "skipped": f"the budget is spent ({max(left, 0):.0f} s left, {needs} s needed)"
            }
        else:
            figure = run_one(side, variant, settings, min(timeout, max(left, 1)))
        rows[variant][side] = figure
        print(f"bench fp8: {variant:<13} {side:<10} {_summary(figure)}", flush=True)
    for variant in VARIANTS:
        rows[variant] = {side: rows[variant][side] for side in SIDES}
    return {"settings": settings, "rows": rows}


def _summary(f: dict[str, Any]) -> str:
    if "error" in f or "skipped" in f:
        return json.dumps({k: f[k] for k in ("error", "skipped") if k in f})
    compile_s = f.get("compile_seconds")
    return (
        f"{f['tokens_per_second']:.0f} tokens/s, step {f['step_seconds']:.4f} s, loss "
        f"{f['first_loss']:.4f} -> {f['last_loss']:.4f}"
        + (f", compile {compile_s:.1f} s" if compile_s is not None else "")
        + f", process {f.get('process_seconds', 0):.1f} s"
    )


def main() -> None:
    side, variant, settings = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    try:
        result = run(side, variant, settings)
    except Exception as exc:
        traceback.print_exc()
        result = {"error": " ".join(f"{type(exc).__name__}: {exc}".split())[:600]}
    sys.stdout.flush()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
