"""A 7B-class model loaded and served: accel, the reference library and the floor side by side.

A Llama-2-7B-shaped checkpoint with random bf16 weights, about 13.5 GB, is written once
(``_llm_checkpoint.py``); each side loads it through transformers in a fresh interpreter per
scenario (accel through ``accel.install_as_accelerate()``) and decodes greedily:

- ``gpu``: ``from_pretrained(device_map="auto", dtype=bfloat16)``, all on the GPU;
- ``half``: the same with a ``max_memory`` that leaves room for half of the decoder layers on the
  main device (computed from the layer sizes), so the other half is offloaded (to the CPU; on a
  CPU-only dry run, to the disk).

Each side reports the load seconds, the decoding speed, the peak device memory and the
generated token ids (which must be equal on both sides: same weights, greedy decoding). The
``floor`` side measures the page-locked host-to-device bandwidth; the floor per token is the
all-GPU time per token (the faster side's: no library can decode faster than the model
computes), and, with layers offloaded, max(offloaded bytes per token / that bandwidth, the
all-GPU time per token).

``python _bench_llm.py SIDE SCENARIO SETTINGS_JSON`` runs one measurement and prints one JSON
object on its last stdout line (``prepare WORK SETTINGS_JSON``: the checkpoint); ``run_all``
runs them all, each in its own process; ``_llm_page.py`` writes the results-page section.
"""

from __future__ import annotations

import concurrent.futures
import importlib.machinery
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from _llm_checkpoint import prepare
from _llm_page import SCENARIOS, brief, markdown

__all__ = ["DRY_SIZES", "GPU_SIZES", "SCENARIOS", "markdown", "prepare", "run", "run_all"]

GPU_SIZES: dict[str, Any] = {
    # Llama-2-7B's shape: 6.74e9 parameters, 13.5 GB in bf16.
    "config": {
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "max_position_embeddings": 4096,
    },
    "shard_bytes": 2_000_000_000,
    "prompt_tokens": 32,
    "new_tokens": {"gpu": 32, "half": 12},
    "warmup_tokens": 3,
    "copy_bytes": 2**30,
    "cpu_max_memory": 64 * 2**30,
}
DRY_SIZES: dict[str, Any] = {
    "config": {
        "vocab_size": 256,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "max_position_embeddings": 128,
    },
    "shard_bytes": 100_000,
    "prompt_tokens": 8,
    "new_tokens": {"gpu": 6, "half": 4},
    "warmup_tokens": 2,
    "copy_bytes": 2**23,
    "cpu_max_memory": 2**30,
}
SIDES = ("accel", "reference", "floor")
HERE = Path(__file__).resolve()


# One measurement ------------------------------------------------------------------------------


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _import_side(side: str) -> tuple[Any, Any]:
    """transformers and torch, with ``accelerate`` resolving to accel or to the reference."""
    if side == "accel":
        import warnings

        import accel

        warnings.filterwarnings("ignore", category=accel.AccelerateShadowedWarning)
        accel.install_as_accelerate()
    elif "accelerate" in sys.modules and getattr(sys.modules["accelerate"], "__accel__", False):
        raise RuntimeError(
            "the reference side needs the installed accelerate, but accel answers 'accelerate' "
            "imports in this process (accel.install_as_accelerate() ran): use a fresh interpreter"
        )
    import accelerate
    import torch
    import transformers

    if (side == "accel") != bool(getattr(accelerate, "__accel__", False)):
        raise RuntimeError(f"'accelerate' is {accelerate.__file__} on the {side} side")
    # transformers imports its modules on first use: import them now, outside the clocks
    import accelerate.big_modeling
    import accelerate.utils
    import transformers.generation.utils
    import transformers.integrations.accelerate
    import transformers.modeling_utils
    from transformers import AutoModelForCausalLM, LlamaForCausalLM  # noqa: F401

    return torch, transformers


def _placement(device_map: dict[str, Any], name: str) -> str:
    """The device of module or parameter ``name`` in a (module prefix -> device) map."""
    best, found = -1, "?"
    for key, value in device_map.items():
        if (key == "" or name == key or name.startswith(key + ".")) and len(key) > best:
            best, found = len(key), str(value)
    return found


def _map_summary(model: Any, layers: int, offloaded_to: tuple[str, ...]) -> dict[str, Any]:
    # transformers dispatches (and sets hf_device_map) only for a map of several devices
    device_map = getattr(model, "hf_device_map", None) or {"": next(model.parameters()).device}
    per_device: dict[str, int] = {}
    for i in range(layers):
        where = _placement(device_map, f"model.layers.{i}")
        per_device[where] = per_device.get(where, 0) + 1
    others = {k: str(v) for k, v in device_map.items() if not k.startswith("model.layers.")}
    offloaded = sum(
        p.numel() * p.element_size()
        for n, p in model.named_parameters()
        if _placement(device_map, n) in offloaded_to
    )
    return {"layers_per_device": per_device, "other_modules": others, "offloaded_bytes": offloaded}


def _generate(model: Any, ids: Any, count: int) -> tuple[float, list[int]]:
    import torch

    _sync(ids.device)
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            max_new_tokens=count,
            min_new_tokens=count,
            pad_token_id=0,
        )
    _sync(ids.device)
    seconds = time.perf_counter() - start
    tokens = out[0, ids.shape[1] :].tolist()
    if len(tokens) != count:
        raise RuntimeError(f"generate gave {len(tokens)} tokens, not {count}")
    return seconds, tokens


def _side(side: str, scenario: str, settings: dict[str, Any]) -> dict[str, Any]:
    torch, transformers = _import_side(side)
    device = torch.device("cuda", 0) if settings["device"] == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.empty(1, device=device)  # the CUDA context, outside every clock
        torch.cuda.reset_peak_memory_stats(device)
    kwargs: dict[str, Any] = {"device_map": "auto", "dtype": torch.bfloat16}
    if scenario == "half":
        budget = settings["half_budget_bytes"]
        kwargs["max_memory"] = (
            {0: budget, "cpu": settings["cpu_max_memory"]}
            if device.type == "cuda"
            else {"cpu": budget}
        )
        folder = Path(settings["work"]) / f"offload-{side}"
        kwargs["offload_folder"] = str(folder)
    _sync(device)
    start = time.perf_counter()
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        settings["checkpoint"], output_loading_info=True, **kwargs
    )
    _sync(device)
    load_seconds = time.perf_counter() - start
    wrong = {k: v for k, v in info.items() if k != "error_msgs" and v}
    if wrong or info.get("error_msgs"):
        raise RuntimeError(f"the checkpoint does not match the model: {str(info)[:300]}")
    layers = settings["config"]["num_hidden_layers"]
    # off the main device: the CPU and the disk for a GPU, the disk for the CPU
    offloaded_to = ("cpu", "disk") if device.type == "cuda" else ("disk",)
    summary = _map_summary(model, layers, offloaded_to)
    offloaded_layers = sum(
        n for where, n in summary["layers_per_device"].items() if where in offloaded_to
    )
    if scenario == "half" and not offloaded_layers:
        raise RuntimeError(
            f"max_memory {kwargs['max_memory']} offloaded no decoder layer: {summary}"
        )
    count = settings["new_tokens"][scenario]
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(
        3, settings["config"]["vocab_size"], (1, settings["prompt_tokens"]), generator=g
    )
    ids = prompt.to(device)
    warmup_seconds, _ = _generate(model, ids, settings["warmup_tokens"])
    seconds, tokens = _generate(model, ids, count)
    return {
        "load_seconds": load_seconds,
        "warmup_seconds": warmup_seconds,
        "generate_seconds": seconds,
        "new_tokens": count,
        "seconds_per_token": seconds / count,
        "tokens_per_second": count / seconds,
        "peak_bytes": torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None,
        "offloaded_layers": offloaded_layers,
        **summary,
        "tokens": tokens,
        "versions": {
            "transformers": transformers.__version__,
            "torch": torch.__version__,
        },
    }


def _bandwidth(settings: dict[str, Any]) -> dict[str, Any]:
    """Bytes per second of the best of 3 copies of ``copy_bytes`` from page-locked host memory
    to the GPU (on a CPU-only machine: of a host memory copy, as a stand-in)."""
    import torch

    nbytes = settings["copy_bytes"]
    cuda = settings["device"] == "cuda"
    if cuda and not torch.cuda.is_available():
        raise RuntimeError("the settings ask for cuda, and torch sees no CUDA device")
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=cuda)
    host.fill_(1)
    target = torch.empty(nbytes, dtype=torch.uint8, device=device)
    best = float("inf")
    for _ in range(3):
        _sync(device)
        start = time.perf_counter()
        target.copy_(host, non_blocking=cuda)
        _sync(device)
        best = min(best, time.perf_counter() - start)
    return {
        "copy_kind": "page-locked host to GPU" if cuda else "host memory copy (no CUDA device)",
        "copy_bytes": nbytes,
        "copy_seconds": best,
        "bytes_per_second": nbytes / best,
    }


def floor_figures(
    floor: dict[str, Any], scenario: str, compute: float | None, offloaded: int | None
) -> dict[str, Any]:
    """The floor per token of ``scenario`` from the measured bandwidth in ``floor``, the all-GPU
    time per token ``compute`` and the offloaded bytes per token."""
    if "error" in floor or "skipped" in floor:
        return floor
    floor = dict(floor)
    offloaded = (offloaded or 0) if scenario == "half" else 0
    transfer = offloaded / floor["bytes_per_second"] if offloaded else 0.0
    floor.update(
        compute_seconds_per_token=compute,
        offloaded_bytes_per_token=offloaded,
        transfer_seconds_per_token=transfer,
    )
    if compute is None:
        floor.update(seconds_per_token=None, tokens_per_second=None)
    else:
        per_token = max(transfer, compute)
        floor.update(seconds_per_token=per_token, tokens_per_second=1 / per_token)
    return floor


def run(side: str, scenario: str, settings: dict[str, Any]) -> dict[str, Any]:
    """One measurement in this process. ``settings`` holds the sizes, ``device`` and what
    ``prepare`` returned; the floor side also reads ``compute_seconds_per_token`` and
    ``offloaded_bytes_per_token`` when they are there."""
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario must be one of {SCENARIOS}, not {scenario!r}")
    if side == "floor":
        return floor_figures(
            _bandwidth(settings),
            scenario,
            settings.get("compute_seconds_per_token"),
            settings.get("offloaded_bytes_per_token", settings.get("half_offloaded_bytes")),
        )
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}, not {side!r}")
    if "checkpoint" not in settings:
        raise ValueError("the settings hold no 'checkpoint': merge what prepare() returned first")
    return _side(side, scenario, settings)


# All of them ----------------------------------------------------------------------------------


def _env(settings: dict[str, Any]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCEL_", "ACCELERATE_"))}
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_VERBOSITY="error",
        TOKENIZERS_PARALLELISM="false",
        PYTHONWARNINGS="ignore",
        ACCEL_BIGMODEL_QUIET="1",
    )
    if settings["device"] != "cuda":
        env["CUDA_VISIBLE_DEVICES"] = ""  # a CPU run stays on the CPU on a GPU machine too
    return env


def _child(args: list[str], settings: dict[str, Any], limit: float) -> dict[str, Any]:
    """``python _bench_llm.py ARGS SETTINGS_JSON`` under ``limit`` seconds; an error or a timeout
    becomes ``{"error": ...}``."""
    command = [sys.executable, str(HERE), *args, json.dumps(settings)]
    start = time.perf_counter()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=limit, env=_env(settings)
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {limit:.0f} s"}
    lines = done.stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        result = None
    if done.returncode != 0 or not isinstance(result, dict):
        sys.stderr.write(done.stderr[-3000:])
        if isinstance(result, dict):
            return result  # the figures name their own errors
        tail = done.stderr.strip().splitlines() or [f"exited with {done.returncode}"]
        return {"error": tail[-1][:300]}
    result["process_seconds"] = time.perf_counter() - start
    return result


def _spec(name: str) -> bool:
    """Whether ``name`` is installed (looked up on the path: in a process where accel answers
    'accelerate' imports, the installed reference still counts)."""
    return importlib.machinery.PathFinder.find_spec(name) is not None


def run_all(settings: dict[str, Any], timeout: float, deadline: float) -> dict[str, Any]:
    """Prepare, then every (scenario, side) in a fresh process, each under ``timeout`` seconds
    and before ``deadline`` (a ``time.monotonic()`` value); a step with under
    ``min_step_seconds`` (default 10) left is skipped.

    On the GPU each (scenario, side) runs in its own process, one after the other; on the CPU (a
    dry run, whose figures mean nothing) each side runs both scenarios in one process, and the
    sides run side by side. The checkpoint is removed at the end. Returns
    ``{"settings", "prepare", "rows": {scenario: {side: figures}}, "tokens_equal": {scenario:
    bool or None}, "half_matches_gpu": {side: bool or None}}``."""
    settings = dict(settings)
    minimum = settings.get("min_step_seconds", 10)
    results: dict[str, Any] = {
        "settings": dict(settings),
        "prepare": {},
        "rows": {scenario: {} for scenario in SCENARIOS},
        "tokens_equal": {},
        "half_matches_gpu": {},
    }
    rows = results["rows"]

    def limit() -> float:
        return min(timeout, deadline - time.monotonic())

    missing = [name for name in ("torch", "transformers") if not _spec(name)]
    if missing:
        reason = f"{' and '.join(missing)} not installed"
        results["prepare"] = {"skipped": reason}
        for scenario in SCENARIOS:
            rows[scenario] = {side: {"skipped": reason} for side in SIDES}
        return results
    work = Path(tempfile.mkdtemp(prefix="accel-llm-bench-", dir=settings.get("work_dir")))
    try:
        if limit() < minimum:
            prepared: dict[str, Any] = {"skipped": "the budget is spent"}
        else:
            prepared = _child(["prepare", str(work)], settings, limit())
        results["prepare"] = prepared
        if "error" in prepared or "skipped" in prepared:
            reason = f"no checkpoint ({prepared.get('error') or prepared.get('skipped')})"
            for scenario in SCENARIOS:
                rows[scenario] = {side: {"skipped": reason} for side in SIDES}
            return results
        settings.update({k: v for k, v in prepared.items() if k != "process_seconds"})
        sides = ["accel", "reference", "floor"]
        if not _spec("accelerate"):
            for scenario in SCENARIOS:
                rows[scenario]["reference"] = {
                    "skipped": "the reference library (accelerate) is not installed"
                }
            sides.remove("reference")

        def one(side: str, scenarios: str) -> dict[str, Any]:
            left = limit()
            if left < minimum:
                return {"skipped": f"the budget is spent ({max(left, 0):.0f} s left)"}
            return _child([side, scenarios], settings, left)

        if settings["device"] == "cuda":
            for scenario in SCENARIOS:
                for side in sides:
                    rows[scenario][side] = one(side, scenario)
                    print(f"bench llm: {scenario:<5} {side:<10} {brief(rows[scenario][side])}")
        else:
            # One process per side for both scenarios, the sides side by side: the dry run
            # checks the code paths, and four fresh interpreters importing transformers one
            # after the other would take minutes on a small machine.
            both = ",".join(SCENARIOS)
            with concurrent.futures.ThreadPoolExecutor(len(sides)) as pool:
                futures = {side: pool.submit(one, side, both) for side in sides}
            for side, future in futures.items():
                found = future.result()
                for scenario in SCENARIOS:
                    rows[scenario][side] = found.get(scenario, found)
        floors = {scenario: rows[scenario].pop("floor") for scenario in SCENARIOS}
        _finish(results, floors)
    finally:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return results


def _finish(results: dict[str, Any], floors: dict[str, dict[str, Any]]) -> None:
    """The floor figures from the measured bandwidth and the sides' rows, and the tokens'
    comparisons."""
    rows = results["rows"]
    per_token = [
        rows["gpu"].get(side, {}).get("seconds_per_token") for side in ("accel", "reference")
    ]
    measured = [t for t in per_token if t is not None]
    compute = min(measured) if measured else None
    offloaded = next(
        (
            rows["half"][side]["offloaded_bytes"]
            for side in ("reference", "accel")
            if "offloaded_bytes" in rows["half"].get(side, {})
        ),
        results["prepare"].get("half_offloaded_bytes"),
    )
    for scenario in SCENARIOS:
        rows[scenario]["floor"] = floor_figures(floors[scenario], scenario, compute, offloaded)
        mine = rows[scenario].get("accel", {}).get("tokens")
        theirs = rows[scenario].get("reference", {}).get("tokens")
        results["tokens_equal"][scenario] = (
            None if mine is None or theirs is None else mine == theirs
        )
    for side in ("accel", "reference"):
        full, half = (
            rows["gpu"].get(side, {}).get("tokens"),
            rows["half"].get(side, {}).get("tokens"),
        )
        results["half_matches_gpu"][side] = (
            None if full is None or half is None else full[: len(half)] == half
        )


def main() -> None:
    if len(sys.argv) != 4:
        raise SystemExit(
            "usage: python _bench_llm.py SIDE SCENARIO SETTINGS_JSON | prepare WORK SETTINGS_JSON"
        )
    first, second, settings = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    if first == "prepare":
        result = _caught(prepare, Path(second), settings)
    elif "," in second:  # several scenarios in this process: {scenario: figures}
        result = {
            scenario: _caught(run, first, scenario, settings) for scenario in second.split(",")
        }
    else:
        result = _caught(run, first, second, settings)
    print(json.dumps(result))
    failed = "error" in result or any("error" in v for v in result.values() if isinstance(v, dict))
    raise SystemExit(1 if failed else 0)


def _caught(function: Any, *args: Any) -> dict[str, Any]:
    try:
        return function(*args)
    except Exception as exc:
        traceback.print_exc()
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}


if __name__ == "__main__":
    main()
