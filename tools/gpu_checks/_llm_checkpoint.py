"""The checkpoint of the 7B-class benchmark (``_bench_llm.py``): Llama's tensor names and shapes
worked out from the config, and the sharded safetensors files written straight from the device,
without building the model."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

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
