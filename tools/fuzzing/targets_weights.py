"""Targets of the weight files: safetensors files, sharded checkpoints with their
``*.index.json``, offload folders (``index.json`` and ``.dat``), DCP folders (merge-weights)."""

from __future__ import annotations

from pathlib import Path

import torch

from ._files import apply, multi_seeds, once
from .registry import Context, register


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))


def _state() -> dict[str, torch.Tensor]:
    sd = {k: v.detach().clone() for k, v in _model().state_dict().items()}
    sd["ids"] = torch.arange(5, dtype=torch.int64)
    sd["half"] = torch.ones(2, 2, dtype=torch.bfloat16)
    return sd


# --- safetensors: one file, read by accel's reader and compared with the safetensors library


def _st_prepare(root: Path) -> Context:
    from safetensors.torch import save_file

    folder = once(root / "safetensors", lambda f: save_file(_state(), f / "model.safetensors"))
    return Context([(folder / "model.safetensors").read_bytes()], "safetensors")


class ReaderDisagrees(Exception):
    """accel's reader accepted a file the ``safetensors`` library refuses, or read other values."""


def _st_run(ctx: Context, data: bytes, scratch: Path) -> None:
    from accel_bigmodel import SafetensorsFile
    from safetensors.torch import load_file

    path = scratch / "model.safetensors"
    path.write_bytes(data)
    file = SafetensorsFile(path)
    ours = {name: file.load(name) for name in file.keys()}
    for name in file.keys():
        file.view(name)
    try:
        theirs = load_file(path)
    except Exception as err:
        raise ReaderDisagrees(f"accel read a file safetensors refuses: {err}") from None
    if set(ours) != set(theirs) or not all(_same_bits(ours[k], theirs[k]) for k in ours):
        raise ReaderDisagrees("accel and safetensors read different tensors")


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same dtype, shape and bytes: ``torch.equal`` calls two NaNs different, and mutated
    bytes are often NaN."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))


register(
    "safetensors",
    "a safetensors file: `SafetensorsFile` (header, every tensor loaded and viewed), checked "
    "against the `safetensors` library",
    _st_prepare,
    _st_run,
)

# --- a sharded safetensors checkpoint: index.json + shards, load_checkpoint_in_model


def _sharded_prepare(root: Path) -> Context:
    def write(folder: Path) -> None:
        from accel import Accelerator

        Accelerator(cpu=True).save_model(_model(), folder, max_shard_size=64)

    folder = once(root / "sharded", write)
    seeds, fmt = multi_seeds(folder)
    return Context(seeds, fmt, folder)


def _sharded_run(ctx: Context, data: bytes, scratch: Path) -> None:
    from accel_bigmodel import load_checkpoint_in_model

    load_checkpoint_in_model(_model(), str(apply(ctx.state, data, scratch)))


register(
    "sharded_checkpoint",
    "a sharded checkpoint folder (`model.safetensors.index.json` and its shards): "
    "`load_checkpoint_in_model`",
    _sharded_prepare,
    _sharded_run,
)

# --- an offload folder written by offload_state_dict: index.json and .dat files


def _offload_prepare(root: Path) -> Context:
    from accel_bigmodel import offload_state_dict

    folder = once(root / "offload", lambda f: offload_state_dict(f, _state()))
    seeds, fmt = multi_seeds(folder)
    return Context(seeds, fmt, folder)


def _offload_run(ctx: Context, data: bytes, scratch: Path) -> None:
    from accel_bigmodel import OffloadedWeightsLoader

    loader = OffloadedWeightsLoader(save_folder=str(apply(ctx.state, data, scratch)))
    for name in loader:
        loader[name].clone()


register(
    "offload_folder",
    "an offload folder (`index.json`, `.dat` files): `OffloadedWeightsLoader`, every weight read",
    _offload_prepare,
    _offload_run,
)

# --- a DCP folder (.metadata + .distcp) as FSDP's sharded save writes it: merge_weights


def _dcp_prepare(root: Path) -> Context:
    def write(folder: Path) -> None:
        import warnings

        import torch.distributed.checkpoint as dcp

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dcp.save({"model": _model().state_dict()}, checkpoint_id=str(folder))

    folder = once(root / "dcp", write)
    seeds, fmt = multi_seeds(folder)
    return Context(seeds, fmt, folder)


def _dcp_run(ctx: Context, data: bytes, scratch: Path) -> None:
    import warnings

    from accel_launch import merge_weights

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        merge_weights(str(apply(ctx.state, data, scratch)), str(scratch / "merged"))


register(
    "dcp_metadata",
    "a DCP folder (`.metadata`, `__0_0.distcp`): `accel merge-weights` (`merge_weights`)",
    _dcp_prepare,
    _dcp_run,
)
