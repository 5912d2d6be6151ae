"""The reference's FSDP checkpoint functions (``save_fsdp_model``, ``load_fsdp_model``,
``save_fsdp_optimizer``, ``load_fsdp_optimizer``) on top of accel's FSDP engine.

They write and read the layout of ``Accelerator.save_state`` (but for the name of the gathered
optimizer file): ``pytorch_model_fsdp_<i>/`` and
``optimizer_fsdp_<i>/`` (``torch.distributed.checkpoint`` folders, one shard per process) with
``SHARDED_STATE_DICT``; ``pytorch_model_fsdp_<i>.safetensors`` and the reference's
``optimizer.bin`` (``optimizer_<i>.bin``; ``optimizer_fsdp_<i>.bin`` is read too), gathered on
the main process, with ``FULL_STATE_DICT``. Every process must call them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from typing import Any

import torch

from .._core._model_probes import is_peft_model
from .._engines.fsdp import _fsdp_io as io


def _sharded(
    fsdp_plugin: Any,
    accelerator: Any,
    what: str,
    adapter_only: bool,
    use_dcp: bool,
    model: Any = None,
) -> bool:
    """Check the arguments; return whether the plugin writes sharded checkpoints.

    ``adapter_only`` asks for the PEFT adapter weights alone: a model without adapters has
    nothing to leave out, so it is saved (or loaded) whole, as the reference does (transformers'
    Trainer passes ``adapter_only=True`` for every model)."""
    if getattr(accelerator.distributed_type, "value", accelerator.distributed_type) != "FSDP":
        raise ValueError(
            f"{what} saves and loads models sharded by FSDP; got an Accelerator whose "
            f"distributed_type is {accelerator.distributed_type}. Launch with FSDP "
            "(Accelerator(fsdp_plugin=...) on several processes), or use save_state / "
            "save_model."
        )
    if adapter_only and is_peft_model(model):
        raise ValueError(
            f"{what}(adapter_only=True) keeps only PEFT adapter weights, which accel's FSDP "
            "checkpoints do not single out; got adapter_only=True for a PEFT model. Save the "
            "whole model (adapter_only=False) and extract the adapter with PEFT's "
            "get_peft_model_state_dict."
        )
    kind = str(getattr(fsdp_plugin.state_dict_type, "name", fsdp_plugin.state_dict_type))
    if kind.upper() == "LOCAL_STATE_DICT":
        raise ValueError(
            f"{what} writes SHARDED_STATE_DICT or FULL_STATE_DICT checkpoints; got "
            "LOCAL_STATE_DICT, whose files only the same number of processes can read. Call "
            "fsdp_plugin.set_state_dict_type('SHARDED_STATE_DICT')."
        )
    sharded = kind.upper() != "FULL_STATE_DICT"
    if sharded and not use_dcp:
        raise ValueError(
            f"{what} writes sharded checkpoints with torch.distributed.checkpoint; got "
            "use_dcp=False. Drop it, or call fsdp_plugin.set_state_dict_type('FULL_STATE_DICT') "
            "for one gathered file."
        )
    return sharded


def _parent(input_dir: str | os.PathLike[str], index: int, names: tuple[str, str]) -> str:
    """The folder that holds entry ``index``: ``input_dir``, or its parent when ``input_dir``
    is the entry's own sharded folder (``.../pytorch_model_fsdp_0``)."""
    path = os.fspath(input_dir)
    if os.path.basename(os.path.normpath(path)) == names[0].format(index):
        return os.path.dirname(os.path.normpath(path))
    return path


def _load(
    what: str,
    names: tuple[str, str],
    input_dir: str | os.PathLike[str],
    index: int,
    trust_pickles: bool,
    load: Callable[[str], bool],
) -> None:
    """Find entry ``index`` (``input_dir`` or, when it is the entry's folder, its parent),
    check its files on every process, then ``load(folder)``.

    Raises:
        FileNotFoundError: when the folder holds neither layout of the entry.
    """
    folder = _parent(input_dir, index, names)
    io.validate(folder, index, trust_pickles=trust_pickles)
    if not load(folder):
        raise FileNotFoundError(
            f"{what} reads {names[0].format(index)}/ or {names[1].format(index)} in the folder "
            f"it is given; {folder!r} holds neither. Pass the folder that save_state / the "
            "matching save function wrote into."
        )


def save_fsdp_model(
    fsdp_plugin: Any,
    accelerator: Any,
    model: torch.nn.Module,
    output_dir: str | os.PathLike[str],
    model_index: int = 0,
    adapter_only: bool = False,
    use_dcp: bool = True,
) -> str:
    """Write the weights of a prepared FSDP model into ``output_dir`` as the plugin's
    ``state_dict_type`` says (a collective: every process calls it).

    Args:
        fsdp_plugin: The run's ``FullyShardedDataParallelPlugin``.
        accelerator: The ``Accelerator`` that prepared ``model``.
        model: The prepared model.
        output_dir: The folder to write into (created).
        model_index: Number in the file names, for several models.
        adapter_only: Ignored for a model without PEFT adapters (it is saved whole); must be
            False for a PEFT model.
        use_dcp: Must be True for sharded checkpoints.

    Returns:
        The path written.
    """
    sharded = _sharded(fsdp_plugin, accelerator, "save_fsdp_model", adapter_only, use_dcp, model)
    os.makedirs(output_dir, exist_ok=True)
    return io.save_model(model, os.fspath(output_dir), model_index, sharded)


def load_fsdp_model(
    fsdp_plugin: Any,
    accelerator: Any,
    model: torch.nn.Module,
    input_dir: str | os.PathLike[str],
    model_index: int = 0,
    adapter_only: bool = False,
    use_dcp: bool = True,
    *,
    trust_pickles: bool = False,
) -> None:
    """Load weights written by ``save_fsdp_model`` (either layout) into a prepared FSDP model.

    Nothing read runs code unless ``trust_pickles=True``; a refused file changes nothing.

    Raises:
        FileNotFoundError: when ``input_dir`` holds no model entry ``model_index``.
        accel_bigmodel.UntrustedPickleError: for a file that would run code when read.
    """
    _sharded(fsdp_plugin, accelerator, "load_fsdp_model", adapter_only, use_dcp, model)
    _load(
        "load_fsdp_model",
        (io.MODEL_DIR, io.MODEL_FILE),
        input_dir,
        model_index,
        trust_pickles,
        lambda folder: io.load_model(model, folder, model_index, trust_pickles=trust_pickles),
    )


def save_fsdp_optimizer(
    fsdp_plugin: Any,
    accelerator: Any,
    optimizer: torch.optim.Optimizer,
    model: torch.nn.Module,
    output_dir: str | os.PathLike[str],
    optimizer_index: int = 0,
    use_dcp: bool = True,
) -> str:
    """Write the state of ``optimizer`` (over the prepared ``model``'s parameters) into
    ``output_dir`` as the plugin's ``state_dict_type`` says (a collective).

    Returns:
        The path written.
    """
    sharded = _sharded(fsdp_plugin, accelerator, "save_fsdp_optimizer", False, use_dcp)
    os.makedirs(output_dir, exist_ok=True)
    inner = getattr(optimizer, "optimizer", optimizer)
    # The gathered file takes the reference's name, which transformers' Trainer looks for to
    # restore the optimizer and scheduler when it resumes.
    name = io.reference_optimizer_file(optimizer_index)
    return io.save_optimizer(model, inner, os.fspath(output_dir), optimizer_index, sharded, name)


def load_fsdp_optimizer(
    fsdp_plugin: Any,
    accelerator: Any,
    optimizer: torch.optim.Optimizer,
    model: torch.nn.Module,
    input_dir: str | os.PathLike[str],
    optimizer_index: int = 0,
    adapter_only: bool = False,
    use_dcp: bool = True,
    *,
    trust_pickles: bool = False,
) -> None:
    """Load an optimizer state written by ``save_fsdp_optimizer`` (either layout).

    Nothing read runs code unless ``trust_pickles=True``; a refused file changes nothing.

    Raises:
        FileNotFoundError: when ``input_dir`` holds no optimizer entry ``optimizer_index``.
        accel_bigmodel.UntrustedPickleError: for a file that would run code when read.
    """
    _sharded(fsdp_plugin, accelerator, "load_fsdp_optimizer", adapter_only, use_dcp, model)
    inner = getattr(optimizer, "optimizer", optimizer)
    _load(
        "load_fsdp_optimizer",
        (io.OPTIM_DIR, io.OPTIM_FILE),
        input_dir,
        optimizer_index,
        trust_pickles,
        lambda folder: io.load_optimizer(
            model, inner, folder, optimizer_index, trust_pickles=trust_pickles
        ),
    )


def get_parameters_from_modules(
    modules: Iterable[torch.nn.Module] | str | None, model: torch.nn.Module, device: Any
) -> set[torch.nn.Parameter]:
    """The parameters of ``modules``, as FSDP's ``ignored_modules`` names them.

    Args:
        modules: Modules, or a regular expression matched in full against the names of
            ``model``'s submodules (each matching module is moved to ``device`` first, as the
            FSDP engine does with ignored modules), or ``None``.
        model: The model the names refer to.
        device: Where a module selected by name is moved.

    Returns:
        The set of their parameters (empty for ``None``).
    """
    if modules is None:
        return set()
    if isinstance(modules, str):
        pattern = re.compile(modules)
        selected = [m for name, m in model.named_modules() if pattern.fullmatch(name)]
        for module in selected:
            module.to(device)
        modules = selected
    return {p for module in modules for p in module.parameters()}
