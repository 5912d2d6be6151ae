"""Memory estimates of a model per dtype, offline, from a module, a config file or a class path."""

from __future__ import annotations

import importlib
import json
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Union

from torch import nn

from ._init_empty import init_empty_weights
from ._progress import human_bytes
from ._sizes import dtype_byte_size, get_max_layer_size, named_module_tensors

DEFAULT_DTYPES = ("float32", "float16", "int8", "int4")
_OPTIMIZER_FACTOR = 4


@dataclass
class MemoryEstimate:
    """Memory needed by one model in one dtype."""

    dtype: str
    """The dtype the weights are counted in."""
    total_size: int
    """Bytes of all weights."""
    largest_layer: int
    """Bytes of the largest layer (what an offloaded forward needs on the execution device)."""
    largest_layer_names: list[str]
    """Names of the layers of that size."""
    training_size: int
    """Rough bytes to train with Adam: weights, gradients and two optimizer moments (4x)."""


def _build_from_config(path: str) -> nn.Module:
    config_path = os.path.join(path, "config.json") if os.path.isdir(path) else path
    if not os.path.isfile(config_path):
        raise FileNotFoundError(
            f"A model to estimate must be a module, a 'module:Class' path, or a local "
            f"config.json; {path!r} is none of these. Pass a folder or file holding config.json."
        )
    try:
        import transformers
    except ImportError:
        raise ImportError(
            f"Estimating from a transformers config ({config_path}) needs transformers, which is "
            f"not installed. Run: pip install transformers"
        ) from None
    with open(config_path, encoding="utf-8") as handle:
        data = json.load(handle)
    config = transformers.AutoConfig.for_model(**data) if "model_type" in data else None
    if config is None:
        raise ValueError(
            f"A transformers config must have a 'model_type'; {config_path} has keys "
            f"{sorted(data)[:10]}. Use a config.json saved by transformers."
        )
    with init_empty_weights():
        try:
            return transformers.AutoModelForCausalLM.from_config(config)
        except ValueError:
            return transformers.AutoModel.from_config(config)


def _build_from_class_path(spec: str) -> nn.Module:
    module_name, _, class_name = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(
            f"A 'module:Class' path must name an importable module; {module_name!r} cannot be "
            f"imported ({exc}). Check the spelling or install the package."
        ) from None
    target: Any = module
    for part in class_name.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise ValueError(
                f"A 'module:Class' path must name an attribute of the module; {spec!r} does not "
                f"exist. Check the class name."
            )
    with init_empty_weights():
        built = target()
    if not isinstance(built, nn.Module):
        raise ValueError(
            f"A 'module:Class' path must build an nn.Module with no arguments; {spec!r} built a "
            f"{type(built).__name__}."
        )
    return built


def _as_model(model: Union[nn.Module, str, os.PathLike]) -> nn.Module:
    if isinstance(model, nn.Module):
        return model
    text = os.fspath(model)
    if os.path.exists(text):
        return _build_from_config(text)
    if ":" in text:
        return _build_from_class_path(text)
    raise FileNotFoundError(
        f"A model to estimate must be a module, a 'module:Class' path, or a local config.json; "
        f"{text!r} is not an existing path nor a 'module:Class' path. This works offline: "
        f"download the config first."
    )


def estimate_memory(
    model: Union[nn.Module, str, os.PathLike[str]],
    dtypes: Sequence[str] = DEFAULT_DTYPES,
) -> list[MemoryEstimate]:
    """Estimates the memory a model needs in each dtype, without allocating its weights.

    Args:
        model: An ``nn.Module`` (meta tensors are fine), a folder or file holding a
            ``transformers`` ``config.json`` (built on the meta device; needs transformers), or a
            ``"package.module:Class"`` path to a class built with no arguments.
        dtypes: Names of the dtypes to report (``"float32"``, ``"bfloat16"``, ``"int8"``,
            ``"int4"`` ...).

    Returns:
        One :class:`MemoryEstimate` per dtype, in the order given.
    """
    built = _as_model(model)
    no_split = list(getattr(built, "_no_split_modules", None) or [])
    top: list[tuple[str, Any]] = [
        *built.named_parameters(recurse=False),
        *built.named_children(),
        *built.named_buffers(recurse=False),
    ]
    tensors = list(named_module_tensors(built, recurse=True))
    rows = []
    for dtype in dtypes:
        factor = dtype_byte_size(dtype)
        sizes: dict[str, int] = defaultdict(int)
        for name, tensor in tensors:
            per = factor if tensor.is_floating_point() else dtype_byte_size(tensor.dtype)
            size = int(tensor.numel() * per)
            sizes[name] += size
            prefix = name
            while "." in prefix:
                prefix = prefix.rsplit(".", 1)[0]
                sizes[prefix] += size
            sizes[""] += size
        largest, names = get_max_layer_size(top, sizes, no_split)
        rows.append(
            MemoryEstimate(
                dtype=dtype,
                total_size=sizes[""],
                largest_layer=largest,
                largest_layer_names=names,
                training_size=sizes[""] * _OPTIMIZER_FACTOR,
            )
        )
    return rows


def format_memory_table(rows: Sequence[MemoryEstimate], title: str = "Memory estimate") -> str:
    """Renders estimates as a plain-text table (one line per dtype)."""
    header = ("dtype", "largest layer", "total size", "training (Adam)")
    body = [
        (
            r.dtype,
            human_bytes(r.largest_layer),
            human_bytes(r.total_size),
            human_bytes(r.training_size),
        )
        for r in rows
    ]
    widths = [max(len(str(line[i])) for line in (header, *body)) for i in range(len(header))]
    rule = "+-" + "-+-".join("-" * w for w in widths) + "-+"
    lines = [
        title,
        rule,
        "| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |",
        rule,
    ]
    for line in body:
        lines.append("| " + " | ".join(str(c).ljust(w) for c, w in zip(line, widths)) + " |")
    lines.append(rule)
    return "\n".join(lines)
