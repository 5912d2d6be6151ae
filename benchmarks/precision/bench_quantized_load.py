"""Load a ~1 GB sharded safetensors checkpoint in fp32, int8 and nf4; accel vs the reference.

Each measurement runs in a fresh subprocess: load time, resident memory after the load and after
one forward pass (which touches every weight), peak resident memory, forward time, and bytes of
quantized weights. The floors load the same files with no library: safetensors'
``safe_open`` shard by shard into the model built on ``meta`` (``load_state_dict(assign=True)``
for float32; for int8 / nf4, bitsandbytes' ``Linear8bitLt`` / ``Linear4bit`` put in place of
every linear layer but the output head, each weight quantized by moving its ``Int8Params`` /
``Params4bit`` to the CPU). Prints one JSON object. ``--layers`` and ``--width`` size the model;
``--out PAGE`` also writes a table into its own section of that page
(``benchmarks/results/precision.md``), keeping the rest.

Run: uv run --group bench python benchmarks/precision/bench_quantized_load.py
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from _machine import status_bytes  # noqa: E402  (benchmarks/_machine.py)
from _workers import run_worker_process  # noqa: E402  (benchmarks/_workers.py)

VARIANTS = [
    "accel-fp32",
    "reference-fp32",
    "accel-int8",
    "reference-int8",
    "accel-nf4",
    "reference-nf4",
    "floor-fp32",
    "floor-int8",
    "floor-nf4",
]
NAMES = {
    "floor-fp32": "floor: hand-written safe_open + load_state_dict(assign=True) fp32",
    "floor-int8": "floor: hand-written safe_open + bitsandbytes Linear8bitLt int8",
    "floor-nf4": "floor: hand-written safe_open + bitsandbytes Linear4bit nf4",
}


def _rss() -> int:
    return status_bytes("VmRSS")


def write_checkpoint(folder: str, layers: int = 4, width: int = 2048) -> None:
    import torch
    from _model import one_gb_model
    from safetensors.torch import save_file

    torch.manual_seed(0)
    model = one_gb_model(layers, width)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    shards: list[dict] = [{}]
    size = 0
    for name, tensor in state.items():
        nbytes = tensor.numel() * tensor.element_size()
        if size + nbytes > 400_000_000 and shards[-1]:
            shards.append({})
            size = 0
        shards[-1][name] = tensor
        size += nbytes
    weight_map = {}
    for i, shard in enumerate(shards):
        file = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, os.path.join(folder, file), metadata={"format": "pt"})
        weight_map.update({name: file for name in shard})
    total = sum(t.numel() * t.element_size() for t in state.values())
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as handle:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, handle)


def child(variant: str, folder: str, layers: int = 4, width: int = 2048) -> dict:
    import torch
    from _model import one_gb_model

    torch.set_num_threads(2)
    side, precision = variant.split("-")
    # torch's first model built on the meta device imports sympy and more (seconds here): every
    # side pays it before the clock starts, so the load columns compare loads alone.
    with torch.device("meta"):
        one_gb_model(1, 8)
    if precision != "fp32":
        import bitsandbytes  # noqa: F401  (a library may import it lazily: not part of a load)
    if side == "floor":
        import safetensors  # noqa: F401  (imported before the clock starts, as the libraries are)

        return _measure(lambda: _floor_load(folder, precision, layers, width), folder, variant)
    if side == "accel":
        from accel_bigmodel import init_empty_weights, load_checkpoint_and_dispatch
        from accel_precision import BnbQuantizationConfig, load_and_quantize_model
    else:
        from accelerate import init_empty_weights, load_checkpoint_and_dispatch
        from accelerate.utils import BnbQuantizationConfig, load_and_quantize_model
    configs = {
        "int8": dict(load_in_8bit=True, torch_dtype=torch.float32),
        "nf4": dict(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.float32
        ),
    }

    def load() -> Any:
        with init_empty_weights():
            model = one_gb_model(layers, width)
        if precision == "fp32":
            return load_checkpoint_and_dispatch(model, folder, device_map={"": "cpu"})
        config = BnbQuantizationConfig(**configs[precision])
        return load_and_quantize_model(
            model, config, weights_location=folder, device_map={"": "cpu"}
        )

    return _measure(load, folder, variant)


def _floor_load(folder: str, precision: str, layers: int, width: int) -> Any:
    """The least code that loads the checkpoint in ``precision``: no library but bitsandbytes."""
    import torch
    from _model import one_gb_model
    from safetensors import safe_open

    with torch.device("meta"):
        model = one_gb_model(layers, width)
    if precision != "fp32":
        import bitsandbytes as bnb

        for name, linear in list(model.named_modules()):
            if not isinstance(linear, torch.nn.Linear) or name == "lm_head":
                continue
            parent, _, attr = name.rpartition(".")
            shape = (linear.in_features, linear.out_features)
            with torch.device("meta"):
                if precision == "int8":
                    layer = bnb.nn.Linear8bitLt(*shape, bias=False, has_fp16_weights=False)
                else:
                    layer = bnb.nn.Linear4bit(
                        *shape, bias=False, compute_dtype=torch.float32, quant_type="nf4"
                    )
            setattr(model.get_submodule(parent), attr, layer)
    for file in sorted(f for f in os.listdir(folder) if f.endswith(".safetensors")):
        with safe_open(os.path.join(folder, file), framework="pt") as shard:
            for key in shard.keys():
                module_name, _, attr = key.rpartition(".")
                module, tensor = model.get_submodule(module_name), shard.get_tensor(key)
                if precision == "int8" and isinstance(module, bnb.nn.Linear8bitLt):
                    param: Any = bnb.nn.Int8Params(
                        tensor, requires_grad=False, has_fp16_weights=False
                    ).to("cpu")
                elif precision == "nf4" and isinstance(module, bnb.nn.Linear4bit):
                    param = bnb.nn.Params4bit(tensor, requires_grad=False, quant_type="nf4")
                    param = param.to("cpu")
                else:
                    param = torch.nn.Parameter(tensor, requires_grad=False)
                module._parameters[attr] = param
    return model


def _measure(load: Any, folder: str, variant: str) -> dict:
    """Load with ``load()``, then one forward: times, resident memory and quantized bytes."""
    import torch

    start_rss = _rss()
    start = time.perf_counter()
    model = load()
    load_s = time.perf_counter() - start
    after_load = _rss()
    ids = torch.randint(0, 8192, (1, 32), generator=torch.Generator().manual_seed(0))
    model.eval()
    with torch.no_grad():
        model(ids)
        start = time.perf_counter()
        out = model(ids)
        forward_s = time.perf_counter() - start
    quantized = 0
    for module in model.modules():
        weight = getattr(module, "weight", None)
        if weight is not None and weight.dtype in (torch.int8, torch.uint8):
            quantized += weight.numel() * weight.element_size()
    return {
        "load_s": round(load_s, 2),
        "rss_after_load_mb": round((after_load - start_rss) / 2**20),
        "rss_after_forward_mb": round((_rss() - start_rss) / 2**20),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "forward_s": round(forward_s, 3),
        "quantized_weights_mb": round(quantized / 2**20),
        "logits_file": _save_logits(out, folder, variant),
    }


def _save_logits(out: object, folder: str, variant: str) -> str:
    import torch

    path = os.path.join(folder, f"logits-{variant}.pt")
    torch.save(out.float(), path)  # type: ignore[attr-defined]
    return path


def _add_errors(results: dict) -> None:
    """Relative L2 error of each variant's logits against accel's float32 logits."""
    import torch

    base = results.get("accel-fp32", {}).get("logits_file")
    if base is None:
        return
    reference = torch.load(base)
    for result in results.values():
        if isinstance(result, dict) and "logits_file" in result:
            logits = torch.load(result.pop("logits_file"))
            result["logits_rel_error_vs_fp32"] = round(
                float((logits - reference).norm() / reference.norm()), 4
            )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", nargs=2, metavar=("VARIANT", "FOLDER"))
    parser.add_argument("--only", nargs="*", default=VARIANTS)
    parser.add_argument("--layers", type=int, default=4, help="decoder blocks of the model")
    parser.add_argument("--width", type=int, default=2048, help="width of the model")
    parser.add_argument("--out", default=None, help="page to write the table into")
    args = parser.parse_args()
    sizes = ["--layers", str(args.layers), "--width", str(args.width)]
    if args.child:
        try:
            result = child(*args.child, args.layers, args.width)
        except Exception as error:  # the reference may refuse the CPU: record its exact error
            result = {
                "error": f"{type(error).__name__}: {error}",
                "where": traceback.format_exc(limit=-2),
            }
        print("RESULT " + json.dumps(result), flush=True)
        return
    folder = tempfile.mkdtemp(prefix="precision-bench-")
    try:
        start = time.perf_counter()
        write_checkpoint(folder, args.layers, args.width)
        size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
        results = {
            "checkpoint_mb": round(size / 2**20),
            "write_s": round(time.perf_counter() - start, 1),
        }
        for variant in args.only:
            run = run_worker_process(
                __file__, "--child", variant, folder, *sizes, timeout=900, marker="RESULT "
            )
            found = run.result()
            results[variant] = found if found is not None else {"error": run.stderr[-2000:]}
            print(variant, results[variant], file=sys.stderr, flush=True)
        _add_errors(results)
        print(json.dumps(results, indent=2))
        if args.out is not None:
            _write_section(args.out, results)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


_COLUMNS = {
    "load_s": "load s",
    "rss_after_load_mb": "RSS after load MB",
    "rss_after_forward_mb": "RSS after forward MB",
    "peak_rss_mb": "peak RSS MB",
    "forward_s": "forward s",
    "quantized_weights_mb": "quantized weights MB",
    "logits_rel_error_vs_fp32": "logit error",
}


def _write_section(out: str, results: dict) -> None:
    """accel and the reference side by side, one row per variant, in the page's section."""
    sys.path.insert(0, str(Path(HERE).parent))
    from _machine import write_section  # benchmarks/_machine.py

    lines = [
        f"## Latest run of `bench_quantized_load.py` (checkpoint {results['checkpoint_mb']} MB)",
        "",
        "| variant | " + " | ".join(_COLUMNS.values()) + " |",
        "| --- |" + " ---: |" * len(_COLUMNS),
    ]
    for variant in VARIANTS:
        result = results.get(variant)
        if result is None:
            continue
        name = NAMES.get(variant, variant.replace("-", " "))
        if "error" in result:
            error = result["error"].strip().splitlines()[0][:120].replace("|", "/")
            lines.append(f"| {name} | error: {error} |" + " |" * (len(_COLUMNS) - 1))
            continue
        cells = [str(result.get(key, "")) for key in _COLUMNS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    write_section(out, "bench_quantized_load", "accel-precision benchmarks", "\n".join(lines))


if __name__ == "__main__":
    main()
