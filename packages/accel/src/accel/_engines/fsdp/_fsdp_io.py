"""Saving and loading sharded models and optimizers with ``torch.distributed.checkpoint``.

Two layouts, chosen by ``state_dict_type`` when saving and recognised by their names when
loading:

- ``SHARDED_STATE_DICT``: ``pytorch_model_fsdp_<i>/`` and ``optimizer_fsdp_<i>/``, folders of
  ``torch.distributed.checkpoint`` where each process writes its own shards (the model entries
  are ``model.<name>``, which ``accel merge-weights`` turns into one safetensors file).
- ``FULL_STATE_DICT``: ``pytorch_model_fsdp_<i>.safetensors`` (the whole model, gathered on
  process 0) and ``optimizer_fsdp_<i>.bin`` (``save_fsdp_optimizer`` writes it under the
  reference's name, ``optimizer.bin`` / ``optimizer_<i>.bin``, and both are read). On loading, process 0 reads the file and the
  others receive their shards from it, one tensor at a time.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import torch
import torch.distributed as dist
from accel_bigmodel import read_dcp_metadata_safely, safe_dcp_load, safe_torch_load

from ..._core._state_files import LOAD_STATE_OPT_IN, load_object

if TYPE_CHECKING:
    from .._base import StateCopy

_S = TypeVar("_S")

MODEL_DIR = "pytorch_model_fsdp_{}"
MODEL_FILE = "pytorch_model_fsdp_{}.safetensors"
OPTIM_DIR = "optimizer_fsdp_{}"
OPTIM_FILE = "optimizer_fsdp_{}.bin"


def reference_optimizer_file(index: int) -> str:
    """The reference's name of a gathered optimizer file (``optimizer.bin`` for entry 0),
    which transformers' ``Trainer`` looks for when it resumes."""
    return "optimizer.bin" if index == 0 else f"optimizer_{index}.bin"


def _optimizer_file(input_dir: str, index: int) -> str:
    """The gathered optimizer file of entry ``index``: accel's name, else the reference's."""
    ours = os.path.join(input_dir, OPTIM_FILE.format(index))
    if os.path.isfile(ours):
        return ours
    return os.path.join(input_dir, reference_optimizer_file(index))


def _options(**kwargs: Any) -> Any:
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(**kwargs)


def full_model_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The whole state dict of a sharded model, on CPU, on process 0 (``{}`` elsewhere).

    A collective: every process must call it.
    """
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    if _fsdp1_on_cpu(model):
        # Offloading a gathered FSDP1 state to the CPU when it already is there crashes
        # torch 2.13; FSDP1's own rank-0-only gathering does the same job.
        from torch.distributed.fsdp import FullStateDictConfig, StateDictType
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        config = FullStateDictConfig(offload_to_cpu=False, rank0_only=True)
        with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, config):
            return model.state_dict()
    state = get_model_state_dict(model, options=_options(full_state_dict=True, cpu_offload=True))
    return state  # type: ignore[return-value]


def _fsdp1_on_cpu(model: torch.nn.Module) -> bool:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    if not isinstance(model, FSDP):
        return False
    return next(iter(model.parameters()), torch.empty(0)).device.type == "cpu"


def save_model(model: torch.nn.Module, output_dir: str, index: int, sharded: bool) -> str:
    """Write ``model`` into ``output_dir``; return the path written (a collective)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    if sharded:
        path = os.path.join(output_dir, MODEL_DIR.format(index))
        dcp.save({"model": get_model_state_dict(model)}, checkpoint_id=path)
        return path
    path = os.path.join(output_dir, MODEL_FILE.format(index))
    state = full_model_state(model)
    if dist.get_rank() == 0:
        _save_full_model(state, path)
    dist.barrier()
    return path


def snapshot(
    models: list[torch.nn.Module],
    optimizers: list[tuple[torch.nn.Module, torch.optim.Optimizer]],
    output_dir: str,
    sharded: bool,
    groups: list[dist.ProcessGroup],
    copy: StateCopy,
) -> Callable[[], None]:
    """Copy the states of ``models`` and ``optimizers`` (each with its model) to host memory
    now and return the job that writes them in the layout of [`save_model`][accel.Accelerator.save_model] /
    `save_optimizer`.

    Sharded layouts go through ``torch.distributed.checkpoint.async_save``: it stages each
    process's shards into host memory before returning, then plans and writes them on a thread
    of its own over one of ``groups`` (a dedicated gloo group per state, so that saves in
    flight never interleave their collectives with each other's nor with the training's).
    Full layouts are gathered on process 0 now (a collective of the calling thread) and
    written by the job. A collective: every process must call it, in the same order.
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (
        get_model_state_dict,
        get_optimizer_state_dict,
    )

    futures: list[Any] = []
    writes: list[Callable[[], None]] = []
    free = iter(groups)
    for i, model in enumerate(models):
        if sharded:
            path = os.path.join(output_dir, MODEL_DIR.format(i))
            model_state: dict[str, Any] = {"model": get_model_state_dict(model)}
            futures.append(
                dcp.async_save(model_state, checkpoint_id=path, process_group=next(free))
            )
        else:
            path = os.path.join(output_dir, MODEL_FILE.format(i))
            writes.append(_writer(_save_full_model, copy(full_model_state(model)), path))
    for i, (model, optimizer) in enumerate(optimizers):
        if sharded:
            path = os.path.join(output_dir, OPTIM_DIR.format(i))
            optim_state: dict[str, Any] = {"optimizer": get_optimizer_state_dict(model, optimizer)}
            futures.append(
                dcp.async_save(optim_state, checkpoint_id=path, process_group=next(free))
            )
        else:
            path = os.path.join(output_dir, OPTIM_FILE.format(i))
            options = _options(full_state_dict=True, cpu_offload=not _fsdp1_on_cpu(model))
            full = copy(get_optimizer_state_dict(model, optimizer, options=options))
            writes.append(_writer(torch.save, full, path))

    def job() -> None:
        for future in futures:
            future.result()
        for write in writes:
            write()

    return job


def _writer(save: Callable[[_S, str], None], state: _S, path: str) -> Callable[[], None]:
    """A job writing ``state`` to ``path`` on process 0 (the only one holding a full state)."""

    def write() -> None:
        if dist.get_rank() == 0:
            save(state, path)

    return write


def _save_full_model(state: dict[str, torch.Tensor], path: str) -> None:
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in state.items()}, path, metadata={"format": "pt"})


def validate(input_dir: str, index: int, trust_pickles: bool = False) -> None:
    """Read the ``.metadata`` of the model and optimizer folders of entry ``index`` through the
    restricted reader, and the full optimizer file with ``weights_only=True`` (memory-mapped),
    so that a tampered file is refused on every process before anything is loaded (the full
    file is otherwise read by process 0 only, and a refusal there would leave the others
    waiting for its broadcast).

    Raises:
        accel_bigmodel.UntrustedPickleError: naming the file, unless ``trust_pickles``.
    """
    if trust_pickles:
        return
    for name in (MODEL_DIR, OPTIM_DIR):
        folder = os.path.join(input_dir, name.format(index))
        if os.path.isdir(folder):
            read_dcp_metadata_safely(folder, opt_in=LOAD_STATE_OPT_IN)
    file = _optimizer_file(input_dir, index)
    if os.path.isfile(file):
        safe_torch_load(file, opt_in=LOAD_STATE_OPT_IN)


def _dcp_load(state: dict[str, Any], folder: str, trust_pickles: bool) -> None:
    safe_dcp_load(state, folder, trust_pickles=trust_pickles, opt_in=LOAD_STATE_OPT_IN)


def load_model(
    model: torch.nn.Module, input_dir: str, index: int, trust_pickles: bool = False
) -> bool:
    """Load ``model`` from whichever layout ``input_dir`` holds; False when it holds neither.

    Nothing read runs code unless ``trust_pickles``.
    """
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict

    folder = os.path.join(input_dir, MODEL_DIR.format(index))
    file = os.path.join(input_dir, MODEL_FILE.format(index))
    if os.path.isdir(folder):
        state = {"model": get_model_state_dict(model)}
        _dcp_load(state, folder, trust_pickles)
        set_model_state_dict(model, state["model"])
        return True
    if os.path.isfile(file):
        from safetensors.torch import load_file

        full = load_file(file) if dist.get_rank() == 0 else {}
        set_model_state_dict(
            model,
            full,  # type: ignore[arg-type]
            options=_options(full_state_dict=True, broadcast_from_rank0=True),
        )
        return True
    return False


def save_optimizer(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    output_dir: str,
    index: int,
    sharded: bool,
    file_name: str | None = None,
) -> str:
    """Write the state of ``optimizer`` (over the parameters of ``model``); a collective.

    ``file_name`` names the gathered file (default ``optimizer_fsdp_<index>.bin``)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    if sharded:
        path = os.path.join(output_dir, OPTIM_DIR.format(index))
        dcp.save({"optimizer": get_optimizer_state_dict(model, optimizer)}, checkpoint_id=path)
        return path
    path = os.path.join(output_dir, file_name or OPTIM_FILE.format(index))
    # FSDP1 on CPU: every process gathers the full state (see full_model_state).
    offload = not _fsdp1_on_cpu(model)
    state = get_optimizer_state_dict(
        model, optimizer, options=_options(full_state_dict=True, cpu_offload=offload)
    )
    if dist.get_rank() == 0:
        torch.save(state, path)
    dist.barrier()
    return path


def load_optimizer(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    input_dir: str,
    index: int,
    trust_pickles: bool = False,
) -> bool:
    """Load ``optimizer`` from whichever layout ``input_dir`` holds; False when neither.

    Nothing read runs code unless ``trust_pickles``.
    """
    from torch.distributed.checkpoint.state_dict import (
        get_optimizer_state_dict,
        set_optimizer_state_dict,
    )

    folder = os.path.join(input_dir, OPTIM_DIR.format(index))
    file = _optimizer_file(input_dir, index)
    if os.path.isdir(folder):
        state = {"optimizer": get_optimizer_state_dict(model, optimizer)}
        _dcp_load(state, folder, trust_pickles)
        set_optimizer_state_dict(model, optimizer, state["optimizer"])
        return True
    if os.path.isfile(file):
        full = load_object(file, trust_pickles=trust_pickles) if dist.get_rank() == 0 else {}
        set_optimizer_state_dict(
            model,
            optimizer,
            full,
            options=_options(full_state_dict=True, broadcast_from_rank0=True),
        )
        return True
    return False
