"""Splitting a state dict into shards of bounded size."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Union

import torch

from ..placement._size_text import convert_file_size_to_int


def _storage_key(tensor: torch.Tensor) -> tuple[Any, ...]:
    if tensor.device.type == "meta":
        return ("meta", id(tensor))
    storage = tensor.untyped_storage()
    return (tensor.device, storage.data_ptr(), storage.nbytes())


def _shard_name(weights_name: str, number: int, count: int) -> str:
    stem, dot, ext = weights_name.rpartition(".")
    if not dot:
        stem, ext = weights_name, ""
    suffix = f"-{number:05d}-of-{count:05d}"
    return f"{stem}{suffix}.{ext}" if ext else f"{stem}{suffix}"


def shard_checkpoint(
    state_dict: Mapping[str, torch.Tensor],
    max_shard_size: Union[int, str] = "10GB",
    weights_name: str = "pytorch_model.bin",
) -> tuple[dict[str, dict[str, torch.Tensor]], dict[str, Any] | None]:
    """Splits a state dict into shards no larger than ``max_shard_size`` (greedy, in key order).

    A tensor that does not fit in the current shard starts a new one, so sizes
    ``[6, 6, 2, 6, 2, 2]`` GB with a 10 GB limit give ``[6], [6+2], [6+2+2]``. A tensor larger
    than the limit gets a shard of its own. Tensors sharing storage (tied weights) stay in one
    shard and are counted once.

    Args:
        state_dict: Name -> tensor.
        max_shard_size: Maximum bytes per shard (``int`` or ``"5GB"``-style string).
        weights_name: Name of the unsharded file; shards are named
            ``<stem>-00001-of-0000N.<ext>``.

    Returns:
        ``(shards, index)``: file name -> sub state dict, and ``None`` for a single shard or
        ``{"metadata": {"total_size": bytes}, "weight_map": {name: file}}``.
    """
    limit = convert_file_size_to_int(max_shard_size)
    blocks: list[dict[str, torch.Tensor]] = [{}]
    block_size = 0
    total = 0
    placed: dict[tuple[Any, ...], int] = {}
    for name, tensor in state_dict.items():
        key = _storage_key(tensor)
        if key in placed:
            blocks[placed[key]][name] = tensor
            continue
        size = tensor.numel() * tensor.element_size()
        if block_size + size > limit and blocks[-1]:
            blocks.append({})
            block_size = 0
        blocks[-1][name] = tensor
        block_size += size
        total += size
        placed[key] = len(blocks) - 1
    if len(blocks) == 1:
        return {weights_name: blocks[0]}, None
    shards: dict[str, dict[str, torch.Tensor]] = {}
    weight_map: dict[str, str] = {}
    for number, block in enumerate(blocks, start=1):
        file_name = _shard_name(weights_name, number, len(blocks))
        shards[file_name] = block
        for name in block:
            weight_map[name] = file_name
    return shards, {"metadata": {"total_size": total}, "weight_map": weight_map}
