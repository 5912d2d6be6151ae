"""A 7B-class model loaded and served: accel, the reference library and the floor side by side.

A Llama-2-7B-shaped checkpoint (hidden 4096, MLP 11008, 32 layers, 32 heads, vocabulary
32000) with random bf16 weights, about 13.5 GB, is written once as sharded safetensors (filled
on the device with a seeded generator, one shard at a time). Then each side loads it through
transformers in a fresh interpreter per scenario (accel through ``accel.install_as_accelerate()``
before transformers is imported, the reference as installed) and decodes greedily:

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

``python _bench_llm.py SIDE SCENARIO SETTINGS_JSON`` runs one measurement in this process and
prints one JSON object on its last stdout line; ``python _bench_llm.py prepare WORK
SETTINGS_JSON`` writes the checkpoint under WORK and prints what ``prepare`` returns.
``run_all`` runs them all, each in its own process.
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
SCENARIOS = ("gpu", "half")
SIDES = ("accel", "reference", "floor")
HERE = Path(__file__).resolve()
STD = 0.02
"""Standard deviation of the random weights (the norms' weights are ones)."""


# The checkpoint -------------------------------------------------------------------------------


def _shapes(config: dict[str, Any]) -> list[tuple[str, tuple[int, ...]]]:
    """The parameter names and shapes of ``LlamaForCausalLM`` (untied head, no biases), in the
    order of its state dict."""
    h, inner = config["hidden_size"], config["intermediate_size"]
    heads, vocab = config["num_attention_heads"], config["vocab_size"]
    head_dim = h // heads
    kv = config.get("num_key_value_heads", heads) * head_dim
    shapes: list[tuple[str, tuple[int, ...]]] = [("model.embed_tokens.weight", (vocab, h))]
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes += [
            (p + "self_attn.q_proj.weight", (heads * head_dim, h)),
            (p + "self_attn.k_proj.weight", (kv, h)),
            (p + "self_attn.v_proj.weight", (kv, h)),
            (p + "self_attn.o_proj.weight", (h, heads * head_dim)),
            (p + "mlp.gate_proj.weight", (inner, h)),
            (p + "mlp.up_proj.weight", (inner, h)),
            (p + "mlp.down_proj.weight", (h, inner)),
            (p + "input_layernorm.weight", (h,)),
            (p + "post_attention_layernorm.weight", (h,)),
        ]
    shapes += [("model.norm.weight", (h,)), ("lm_head.weight", (vocab, h))]
    return shapes


def _nbytes(shape: tuple[int, ...]) -> int:
    n = 2  # bf16
    for d in shape:
        n *= d
    return n


def plan(config: dict[str, Any]) -> dict[str, Any]:
    """The sizes of the model's parts and the ``max_memory`` budget of the main device that holds
    the embedding and half of the decoder layers.

    transformers places the modules in order (the embedding, the layers, the final norm, the
    head) and keeps room for the largest no-split module (a decoder layer) on the main device
    when anything is offloaded: with E the embedding and L a layer, k layers fit when
    E + (k + 1) L <= budget < E + (k + 2) L; the budget sits in the middle of that range. The
    final norm and the head follow the last layer off the device."""
    shapes = dict(_shapes(config))
    layers = config["num_hidden_layers"]
    layer = sum(_nbytes(s) for n, s in shapes.items() if n.startswith("model.layers.0."))
    embed = _nbytes(shapes["model.embed_tokens.weight"])
    head = _nbytes(shapes["lm_head.weight"])
    norm = _nbytes(shapes["model.norm.weight"])
    on_device = layers // 2
    offloaded = layers - on_device
    return {
        "layer_bytes": layer,
        "embed_bytes": embed,
        "head_bytes": head,
        "model_bytes": sum(_nbytes(s) for s in shapes.values()),
        "half_device_layers": on_device,
        "half_budget_bytes": embed + (on_device + 1) * layer + layer // 2,
        "half_offloaded_bytes": offloaded * layer + norm + head,
    }


def _config_json(config: dict[str, Any]) -> dict[str, Any]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 0,
        "initializer_range": STD,
        "use_cache": True,
        "torch_dtype": "bfloat16",
        **config,
    }


def _shards(config: dict[str, Any], limit: int) -> list[list[tuple[str, tuple[int, ...]]]]:
    shards: list[list[tuple[str, tuple[int, ...]]]] = [[]]
    size = 0
    for name, shape in _shapes(config):
        if shards[-1] and size + _nbytes(shape) > limit:
            shards.append([])
            size = 0
        shards[-1].append((name, shape))
        size += _nbytes(shape)
    return shards


def _header(entries: list[tuple[str, tuple[int, ...]]]) -> tuple[bytes, list[int]]:
    """A safetensors header (8-byte length, JSON padded to 8 bytes) and the tensors' offsets."""
    meta: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offsets, at = [], 0
    for name, shape in entries:
        offsets.append(at)
        meta[name] = {
            "dtype": "BF16",
            "shape": list(shape),
            "data_offsets": [at, at + _nbytes(shape)],
        }
        at += _nbytes(shape)
    text = json.dumps(meta, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text, offsets + [at]


def prepare(work: Path, settings: dict[str, Any]) -> dict[str, Any]:
    """Writes the checkpoint under ``work``; returns the keys to merge into the settings.

    Each shard is one byte buffer on the device, filled tensor by tensor with a seeded generator
    (random normal weights, norms at one), copied once into a reused page-locked host buffer
    and written after its header: the model is never built, nor held twice in host memory."""
    import shutil

    import torch

    config = settings["config"]
    sizes = plan(config)
    device = torch.device(settings["device"])
    folder = Path(work) / "llama-7b-shape"
    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free
    if free < sizes["model_bytes"] * 1.05:
        raise RuntimeError(
            f"not enough disk space under {folder} for the {sizes['model_bytes'] / 1e9:.2f} GB "
            f"checkpoint ({free / 1e9:.2f} GB free)"
        )
    shards = _shards(config, settings["shard_bytes"])
    biggest = max(sum(_nbytes(s) for _, s in entries) for entries in shards)
    generator = torch.Generator(device=device).manual_seed(0)
    cuda = device.type == "cuda"
    if cuda:
        torch.empty(1, device=device)  # the CUDA context, outside the clock
    start = time.perf_counter()
    staging = torch.empty(biggest, dtype=torch.uint8, device=device)
    host = torch.empty(biggest, dtype=torch.uint8, pin_memory=True) if cuda else staging
    weight_map: dict[str, str] = {}
    written = 0
    for index, entries in enumerate(shards):
        name = f"model-{index + 1:05d}-of-{len(shards):05d}.safetensors"
        header, offsets = _header(entries)
        for (key, shape), begin, end in zip(entries, offsets, offsets[1:]):
            view = staging[begin:end].view(torch.bfloat16).view(shape)
            if key.endswith("norm.weight"):
                view.fill_(1.0)
            else:
                view.normal_(0.0, STD, generator=generator)
            weight_map[key] = name
        size = offsets[-1]
        if cuda:
            host[:size].copy_(staging[:size])
        with open(folder / name, "wb") as f:
            f.write(header)
            f.write(memoryview(host[:size].numpy()))
        written += size + len(header)
    index_json = {"metadata": {"total_size": sizes["model_bytes"]}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index_json, indent=1))
    (folder / "config.json").write_text(json.dumps(_config_json(config), indent=1))
    seconds = time.perf_counter() - start
    del staging, host
    return {
        "checkpoint": str(folder),
        "work": str(work),
        "checkpoint_bytes": written,
        "shards": len(shards),
        "write_seconds": seconds,
        **sizes,
    }


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
                    print(f"bench llm: {scenario:<5} {side:<10} {_brief(rows[scenario][side])}")
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


def _brief(figures: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in figures.items() if k not in ("tokens", "other_modules")})


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


# The results page -----------------------------------------------------------------------------


def _gib(n: float | None) -> str:
    return "-" if n is None else f"{n / 2**30:.2f} GiB"


def _text(f: dict[str, Any]) -> str | None:
    if "error" in f or "skipped" in f:
        return (f.get("error") or f"skipped: {f['skipped']}").replace("|", "/")[:200]
    return None


def _num(value: float | None, fmt: str = "{:.4f}") -> str:
    return "-" if value is None else fmt.format(value)


def _yes(value: bool | None) -> str:
    return "-" if value is None else "yes" if value else "**NO**"


def markdown(results: dict[str, Any]) -> list[str]:
    """The results page's section: the checkpoint, then one table per scenario."""
    s, prep, rows = results["settings"], results.get("prepare", {}), results["rows"]
    c = s["config"]
    lines = [
        f"### A 7B-class model loaded and served ({c['num_hidden_layers']} layers of width "
        f"{c['hidden_size']}, MLP {c['intermediate_size']}, vocabulary {c['vocab_size']}, random "
        "bf16 weights)",
        "",
    ]
    if _text(prep):
        lines += [f"Checkpoint: {_text(prep)}", ""]
    else:
        rate = prep["checkpoint_bytes"] / prep["write_seconds"] / 1e9
        lines += [
            f"Checkpoint: {prep['checkpoint_bytes'] / 1e9:.2f} GB in {prep['shards']} safetensors "
            f"shards, written in {prep['write_seconds']:.1f} s ({rate:.2f} GB/s, into the page "
            f"cache). Prompt of {s['prompt_tokens']} token ids, greedy decoding after a "
            f"{s['warmup_tokens']}-token warm-up; each side in a fresh interpreter, accel through "
            "`accel.install_as_accelerate()`, the reference as installed.",
            "",
        ]
    device = s["device"]
    titles = {
        "gpu": f'All on {device}: `from_pretrained(device_map="auto", dtype=torch.bfloat16)`',
        "half": "Half of the decoder layers offloaded: the same with `max_memory` "
        + (
            f'{{0: {_gib(prep.get("half_budget_bytes"))}, "cpu": {_gib(s.get("cpu_max_memory"))}}}'
            if device == "cuda"
            else f'{{"cpu": {_gib(prep.get("half_budget_bytes"))}}} (the rest on disk)'
        ),
    }
    for scenario in SCENARIOS:
        sides = rows.get(scenario, {})
        lines += [
            f"#### {titles[scenario]}, {s['new_tokens'][scenario]} new tokens",
            "",
        ]
        placed = next(
            (sides[k] for k in ("accel", "reference") if "layers_per_device" in sides.get(k, {})),
            None,
        )
        if scenario == "half" and placed is not None:
            counts = ", ".join(f"{n} on {d}" for d, n in placed["layers_per_device"].items())
            lines += [
                f"Decoder layers: {counts}; offloaded per token: "
                f"{placed['offloaded_bytes'] / 1e9:.2f} GB.",
                "",
            ]
        lines += [
            "| side | load | tokens/s | s/token | floor s/token | ratio to floor | peak device memory | tokens equal |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        floor = sides.get("floor", {})
        floor_token = floor.get("seconds_per_token")
        equal = results.get("tokens_equal", {}).get(scenario)
        for side in ("accel", "reference"):
            f = sides.get(side, {})
            if _text(f):
                lines.append(f"| {side} | {_text(f)} | - | - | - | - | - | - |")
                continue
            per_token = f["seconds_per_token"]
            lines.append(
                f"| {side} | {f['load_seconds']:.1f} s | {f['tokens_per_second']:.2f} | "
                f"{per_token:.4f} | {_num(floor_token)} | "
                f"{_num(floor_token and per_token / floor_token, '{:.2f}')} | "
                f"{_gib(f.get('peak_bytes'))} | {_yes(equal)} |"
            )
        if _text(floor):
            lines.append(f"| floor | {_text(floor)} | - | - | - | - | - | - |")
        else:
            bw = f"{floor['bytes_per_second'] / 1e9:.1f} GB/s ({floor['copy_kind']})"
            compute = floor.get("compute_seconds_per_token")
            compute_text = _num(compute, "{:.4f} s")
            if scenario == "half":
                label = (
                    f"floor: max({floor['offloaded_bytes_per_token'] / 1e9:.2f} GB at {bw} = "
                    f"{floor['transfer_seconds_per_token']:.4f} s, all-on-device time {compute_text})"
                )
            else:
                label = f"floor: the faster side's time per token on the device ({compute_text})"
            rate = floor.get("tokens_per_second")
            lines.append(
                f"| {label} | - | {_num(rate, '{:.2f}')} | {_num(floor_token)} | - | - | - | - |"
            )
        lines.append("")
    matches = results.get("half_matches_gpu", {})
    if any(v is not None for v in matches.values()):
        lines += [
            "The offloaded run's tokens equal the first ones of the all-device run: "
            + ", ".join(f"{side} {_yes(v)}" for side, v in matches.items())
            + ".",
            "",
        ]
    return lines


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
