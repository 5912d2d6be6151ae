"""CPU-offloaded weights kept in page-locked memory for the model's lifetime.

A module offloaded to the CPU runs on the GPU: before each of its forwards its weights cross the
bus. From pageable memory they first go through a page-locked staging buffer (one more memory
copy, made by the prefetcher's reader threads); from page-locked memory the device reads them
directly, at the bus's full speed, with no CPU work. The price is memory the kernel can no
longer swap or move, taken for as long as the model lives.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass

import torch
from torch import nn

from ..offload._prefetch_pool import held_map
from ._prefetch_attach import attach_prefetcher, offloaded_hooks

PIN_BLOCK_BYTES = 256 * 2**20
"""Bytes of one page-locked block. torch's page-locked allocator rounds every allocation up to
a power of two, so weights are packed into blocks of exactly such a size (a larger tensor gets
the next power of two, shared with smaller ones), which keeps the rounding's waste to the last
block's free tail instead of up to half of each tensor."""
_ALIGN = 512


@dataclass(frozen=True)
class PinnedWeights:
    """What [`pin_offloaded_weights`][accel_bigmodel.pin_offloaded_weights] did.

    Attributes:
        tensors: Weights moved into page-locked memory (each tied group counted once).
        weight_bytes: Their bytes.
        pinned_bytes: Page-locked memory taken for them: the blocks they were packed into, for
            as long as the model lives (the pageable copies are freed unless something else
            still holds them).
    """

    tensors: int
    weight_bytes: int
    pinned_bytes: int


Identity = tuple[int, torch.dtype, tuple[int, ...], tuple[int, ...]]
"""A tensor's address, dtype, shape and strides: the same weight under several names."""


def _identity(tensor: torch.Tensor) -> Identity:
    return (tensor.data_ptr(), tensor.dtype, tuple(tensor.shape), tuple(tensor.stride()))


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _power_of_two(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def pack(tensors: list[torch.Tensor], pin: bool = True) -> tuple[list[torch.Tensor], int]:
    """Copies of ``tensors`` inside a few (page-locked, with ``pin``) blocks, in their order,
    and the blocks' total bytes.

    Largest first, each tensor goes into the first block with room; a tensor no block can hold
    opens one of `PIN_BLOCK_BYTES`, or of the next power of two when it is larger.
    """
    order = sorted(
        range(len(tensors)), key=lambda i: -tensors[i].numel() * tensors[i].element_size()
    )
    blocks: list[list[int]] = []  # [size, used]
    where: dict[int, tuple[int, int]] = {}
    for i in order:
        nbytes = _aligned(tensors[i].numel() * tensors[i].element_size())
        for number, (size, used) in enumerate(blocks):
            if size - used >= nbytes:
                where[i] = (number, used)
                blocks[number][1] += nbytes
                break
        else:
            where[i] = (len(blocks), 0)
            blocks.append([max(PIN_BLOCK_BYTES, _power_of_two(nbytes)), nbytes])
    memory = [torch.empty(size, dtype=torch.uint8, pin_memory=pin) for size, _ in blocks]
    copies = []
    for i, tensor in enumerate(tensors):
        number, offset = where[i]
        nbytes = tensor.numel() * tensor.element_size()
        piece = memory[number][offset : offset + nbytes]
        if nbytes:
            piece.copy_(tensor.reshape(-1).view(torch.uint8))
        copies.append(piece.view(tensor.dtype).view(tensor.shape))
    return copies, sum(size for size, _ in blocks)


def pin_offloaded_weights(model: nn.Module) -> PinnedWeights:
    """Keeps the weights of a dispatched model's CPU-offloaded modules in page-locked memory.

    A module offloaded to the CPU runs on the GPU, so its weights cross the bus at each forward.
    By default they stay in ordinary (pageable) memory and cross through the prefetcher's
    page-locked staging buffers, one more memory copy each time. After this call they live in
    page-locked memory and the GPU reads them directly: the transfer runs at the bus's
    page-locked speed and costs no CPU time. Call it once, after
    [`dispatch_model`][accel_bigmodel.dispatch_model],
    [`load_checkpoint_and_dispatch`][accel_bigmodel.load_checkpoint_and_dispatch] or
    transformers' ``from_pretrained(device_map=...)``; the outputs do not change.

    Memory cost: the CPU-offloaded weights' bytes stay page-locked until the model is freed
    (``pinned_bytes`` of the result, their size rounded up to whole blocks of
    `PIN_BLOCK_BYTES`). Page-locked memory cannot be swapped out, so leave enough ordinary memory
    for the rest of the machine. While each weight is copied, it briefly exists twice. Weights
    offloaded to disk are not affected, nor are weights something else still holds (their
    pageable copy then stays alive too).

    Args:
        model: A model dispatched with modules on ``"cpu"`` and execution on a CUDA device.

    Returns:
        How many weights were pinned, their bytes, and the page-locked memory taken.

    Raises:
        RuntimeError: when no CUDA device is available (page-locked memory only speeds up copies
            to one), or when the model has no CPU-offloaded module running on a CUDA device.

    Example:
        >>> model = load_checkpoint_and_dispatch(model, "ckpt", device_map={"layers.0": 0, "layers.1": "cpu"})
        >>> pin_offloaded_weights(model).pinned_bytes
        268435456
    """
    if not torch.cuda.is_available():
        raise RuntimeError(
            "pin_offloaded_weights keeps CPU-offloaded weights page-locked to speed up their "
            "copies to a CUDA device, and no CUDA device is available here; leave the weights "
            "as they are (the offloaded model runs the same without it)."
        )
    hooks = [
        h for h in offloaded_hooks(model) if (t := h._target()) is not None and t.type == "cuda"
    ]
    slots: list[tuple[MutableMapping[str, torch.Tensor], str, torch.Tensor]] = []
    for hook in hooks:
        held, prefix, device = held_map(hook.weights_map)
        if held is None or device is not None:
            continue
        for name in hook.offloaded_names:
            key = f"{prefix}{name}"
            tensor = held.get(key)
            if isinstance(tensor, torch.Tensor) and tensor.device.type == "cpu":
                slots.append((held, key, tensor))
    if not slots:
        raise RuntimeError(
            "pin_offloaded_weights found no CPU-offloaded weights running on a CUDA device in "
            "this model. Dispatch it first with some modules on 'cpu' and the rest on a GPU "
            "(for example device_map={'layers.0': 0, 'layers.1': 'cpu'})."
        )
    unique: dict[Identity, torch.Tensor] = {}
    for _, _, tensor in slots:
        if not tensor.is_pinned():
            unique.setdefault(_identity(tensor), tensor)
    originals = list(unique.values())
    copies, pinned_bytes = pack(originals) if originals else ([], 0)
    replaced = {id(old): new for old, new in zip(originals, copies)}
    by_identity = {key: replaced[id(old)] for key, old in unique.items()}
    ties: dict[int, int] = {}
    for held, key, tensor in slots:
        new = by_identity.get(_identity(tensor))
        if new is not None:
            ties[tensor.data_ptr()] = new.data_ptr()
            held[key] = new
    for hook in hooks:  # tied weights are found by address: follow them to their new place
        tied = hook.tied_params_map
        if tied is not None:
            for old, new_ptr in ties.items():
                if old in tied:
                    tied[new_ptr] = tied.pop(old)
    prefetcher = getattr(model, "_accel_prefetcher", None)
    if prefetcher is not None:  # it plans per module: pinned weights need no staging buffer
        attach_prefetcher(
            model,
            prefetcher.layers_ahead,
            prefetcher.requested_pool_bytes,
            cache_bytes=prefetcher.cache_bytes,
        )
    return PinnedWeights(
        tensors=len(originals),
        weight_bytes=sum(t.numel() * t.element_size() for t in originals),
        pinned_bytes=pinned_bytes,
    )
