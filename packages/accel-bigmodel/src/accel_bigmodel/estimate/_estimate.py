"""Memory estimates of a model per dtype, offline, from a module, a config file or a class path.

Importing this module imports no torch: a config.json of a family `_config_shapes` knows
is estimated from its fields alone; anything else is built on the meta device (torch, and
transformers for a config).
"""

from __future__ import annotations

import importlib
import json
import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from ..files._progress import human_bytes
from ._config_shapes import skeleton_from_config_file
from ._config_skeleton import DTYPE_BYTES, ConfigSkeleton

if TYPE_CHECKING:
    from torch import nn

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
    from ..hooks._init_empty import init_empty_weights

    with init_empty_weights():
        try:
            return transformers.AutoModelForCausalLM.from_config(config)
        except ValueError:
            return transformers.AutoModel.from_config(config)


def _build_from_class_path(spec: str) -> nn.Module:
    from torch import nn

    from ..hooks._init_empty import init_empty_weights

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
    if not (isinstance(target, type) and issubclass(target, nn.Module)):
        # Only a module class is called: any other callable (os:abort) could do anything.
        raise ValueError(
            f"A 'module:Class' path must name an nn.Module class, built with no arguments; "
            f"{spec!r} names a {type(target).__name__}, which is not called. Name the model's "
            "class (e.g. 'torch.nn:Transformer')."
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
    if not isinstance(model, (str, os.PathLike)):
        from torch import nn

        if not isinstance(model, nn.Module):
            raise TypeError(
                "A model to estimate must be an nn.Module, a 'module:Class' path or a local "
                f"config.json; got a {type(model).__name__}. Pass one of these."
            )
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

    A ``config.json`` of a family whose shapes follow from its fields alone (llama, mistral,
    qwen2, qwen3, gemma, gemma2, phi3, gpt2, gpt_neox; see ``CONFIG_FAMILIES``) is estimated
    without importing torch or transformers, with the same result as the model built on ``meta``.

    Args:
        model: An ``nn.Module`` (meta tensors are fine), a folder or file holding a
            ``transformers`` ``config.json`` (built on the meta device with transformers unless
            its family is known), or a ``"package.module:Class"`` path to a class built with no
            arguments.
        dtypes: Names of the dtypes to report (``"float32"``, ``"bfloat16"``, ``"int8"``,
            ``"int4"`` ...).

    Returns:
        One [`MemoryEstimate`][accel_bigmodel.MemoryEstimate] per dtype, in the order given.
    """
    if isinstance(model, (str, os.PathLike)):
        known = estimate_memory_from_config(model, dtypes)
        if known is not None:
            return known
    from ..placement._sizes import dtype_byte_size, get_max_layer_size, named_module_tensors

    built = _as_model(model)
    no_split = list(getattr(built, "_no_split_modules", None) or [])
    top: list[tuple[str, Any]] = [
        *built.named_parameters(recurse=False),
        *built.named_children(),
        *built.named_buffers(recurse=False),
    ]
    tensors = [
        (name, t.numel(), None if t.is_floating_point() else dtype_byte_size(t.dtype))
        for name, t in named_module_tensors(built, recurse=True)
    ]
    return _rows(
        tensors,
        dtypes,
        dtype_byte_size,
        lambda sizes: get_max_layer_size(top, sizes, no_split),
    )


def estimate_memory_from_config(
    path: Union[str, os.PathLike[str]], dtypes: Sequence[str] = DEFAULT_DTYPES
) -> list[MemoryEstimate] | None:
    """[`estimate_memory`][accel_bigmodel.estimate_memory] of a config.json from its fields alone, without torch.

    Args:
        path: A folder holding ``config.json``, or the file itself.
        dtypes: Names of the dtypes to report.

    Returns:
        The rows [`estimate_memory`][accel_bigmodel.estimate_memory] gives for the model built on ``meta``, or ``None`` when
        the config is not one whose shapes are known exactly (another family, an unusual field,
        ``auto_map``, ``quantization_config`` ...), the file is missing, or a dtype is not a
        plain name (``float32`` ... ``int4``): then build the model instead.

    Raises:
        ValueError: when a layer or expert count of the config passes 10000 (any family),
            before anything is built per layer.
    """
    if not all(dtype in DTYPE_BYTES for dtype in dtypes):
        return None
    skeleton = skeleton_from_config_file(os.fspath(path))
    return None if skeleton is None else _skeleton_rows(skeleton, dtypes)


def _skeleton_rows(skeleton: ConfigSkeleton, dtypes: Sequence[str]) -> list[MemoryEstimate]:

    def largest(sizes: Mapping[str, int]) -> tuple[int, list[str]]:
        best, names = 0, []  # the comparison get_max_layer_size makes, over the known layers
        for name in skeleton.layers:
            size = sizes.get(name, 0)
            if size > best:
                best, names = size, [name]
            elif size == best:
                names.append(name)
        return best, names

    tensors = [(name, numel, None) for name, numel in skeleton.tensors]
    return _rows(tensors, dtypes, DTYPE_BYTES.__getitem__, largest)


def _rows(
    tensors: Iterable[tuple[str, int, Union[int, float, None]]],
    dtypes: Sequence[str],
    byte_size: Callable[[str], Union[int, float]],
    largest_layer: Callable[[Mapping[str, int]], tuple[int, list[str]]],
) -> list[MemoryEstimate]:
    """One row per dtype from ``(name, numel, bytes per element or None if floating)``."""
    tensors = list(tensors)
    rows = []
    for dtype in dtypes:
        factor = byte_size(dtype)
        sizes: dict[str, int] = defaultdict(int)
        for name, numel, own in tensors:
            size = int(numel * (factor if own is None else own))
            sizes[name] += size
            prefix = name
            while "." in prefix:
                prefix = prefix.rsplit(".", 1)[0]
                sizes[prefix] += size
            sizes[""] += size
        largest, names = largest_layer(sizes)
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
