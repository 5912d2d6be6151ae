"""Context parallelism on torch's ``context_parallel``: every process of the ``cp`` mesh
dimension holds a slice of each sequence, and attention runs as ring attention over them.

``torch.distributed.tensor.experimental.context_parallel`` shards the given buffers along their
sequence dimension (head-and-tail load balancing for causal attention) and routes
``F.scaled_dot_product_attention`` through ring attention for the CUDA kernels (flash,
memory-efficient, cuDNN). On a CPU mesh this module adds the one missing piece: the CPU flash
kernel (``_scaled_dot_product_flash_attention_for_cpu`` and its backward) goes through the
same ring algorithm (torch's ``_templated_ring_attention``), so gloo runs the real thing.
The SDPA backends are restricted inside the context so that no kernel without a ring path
(the math fallback) can silently compute attention over a reordered sequence.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

_SEQ_DIM = 2
"""Sequence dimension of query, key and value (batch, heads, sequence, head_dim)."""


def check_buffers(
    buffers: Sequence[torch.Tensor] | None,
    buffer_seq_dims: Sequence[int] | None,
    no_restore_buffers: set[torch.Tensor] | None,
    cp_size: int,
) -> None:
    """Refuse buffers that context parallelism cannot split evenly.

    Raises:
        ValueError: naming the rule, the buffers' shapes and the fix.
    """
    buffers = list(buffers or [])
    dims = list(buffer_seq_dims or [])
    if len(buffers) != len(dims):
        raise ValueError(
            "maybe_context_parallel takes one sequence dimension per buffer; got "
            f"{len(buffers)} buffers and {len(dims)} dimensions. Pass buffer_seq_dims with one "
            "entry per buffer."
        )
    for buffer in no_restore_buffers or ():
        if not any(buffer is b for b in buffers):
            raise ValueError(
                "maybe_context_parallel: no_restore_buffers must be a subset of buffers; got a "
                f"tensor of shape {tuple(buffer.shape)} that is not in buffers. Pass the same "
                "tensor objects in both."
            )
    if cp_size == 1:
        return
    if not buffers:
        raise ValueError(
            f"maybe_context_parallel with cp_size={cp_size} splits the sequences of the given "
            "buffers; got no buffers. Pass the batch's sequence tensors, e.g. "
            "buffers=[input_ids, position_ids, labels], buffer_seq_dims=[1, 1, 1]."
        )
    lengths = {int(b.shape[d]) for b, d in zip(buffers, dims)}
    shapes = [tuple(b.shape) for b in buffers]
    if len(lengths) != 1:
        raise ValueError(
            "maybe_context_parallel needs every buffer to have the same sequence length along "
            f"its buffer_seq_dims; got shapes {shapes} with dims {dims}. Check buffer_seq_dims."
        )
    (length,) = lengths
    if length % cp_size:
        raise ValueError(
            f"context parallelism splits each sequence into cp_size={cp_size} equal parts; got "
            f"sequence length {length} (buffers {shapes}). Pad the sequences to a multiple of "
            f"{2 * cp_size} (a multiple of 2 * cp_size also balances causal attention)."
        )


def _flash_cpu_ops() -> tuple[Any, Any]:
    aten = torch.ops.aten
    return (
        aten._scaled_dot_product_flash_attention_for_cpu.default,
        aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
    )


def _ring_flash_cpu(op_call: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """DTensor handler of the CPU flash kernel (forward and backward): torch's ring
    attention over the ``cp`` mesh of the inputs, with the CPU kernel for each block."""
    from torch.distributed.tensor import DTensor, Shard
    from torch.distributed.tensor.experimental._context_parallel import _attention as ring

    forward, backward = _flash_cpu_ops()
    mesh = next(a for a in [*args, *kwargs.values()] if isinstance(a, DTensor)).device_mesh
    local = [a.to_local() if isinstance(a, DTensor) else a for a in args]
    options = {k: v.to_local() if isinstance(v, DTensor) else v for k, v in kwargs.items()}
    if options.get("attn_mask") is not None:
        raise ValueError(
            "context parallelism computes causal attention over the split sequence and takes "
            f"no attn_mask; got a mask of shape {tuple(options['attn_mask'].shape)}. Call "
            "scaled_dot_product_attention with is_causal=True and no mask."
        )
    scale = options.get("scale")
    group = mesh.get_group()
    if op_call is forward:
        query, key, value, *rest = local
        dropout_p = rest[0] if rest else options.get("dropout_p", 0.0)
        is_causal = rest[1] if len(rest) > 1 else options.get("is_causal", False)
        results = ring._templated_ring_attention(
            group,
            _SEQ_DIM,
            forward,
            query=query,
            key=key,
            value=value,
            is_causal=bool(is_causal),
            dropout_p=dropout_p,
            scale=scale,
        )
    else:
        grad_out, query, key, value, out, logsumexp, dropout_p, is_causal = local[:8]
        results = ring._templated_ring_attention_backward(
            group,
            _SEQ_DIM,
            backward,
            grad_out=grad_out,
            grad_out_name="grad_out",
            query=query,
            key=key,
            value=value,
            out=out,
            logsumexp=logsumexp,
            is_causal=bool(is_causal),
            dropout_p=dropout_p,
            scale=scale,
        )
    return tuple(DTensor.from_local(r, mesh, [Shard(_SEQ_DIM)], run_check=False) for r in results)


@contextlib.contextmanager
def _cpu_ring_kernels() -> Iterator[None]:
    """Register the CPU flash kernel with torch's ring attention for the duration."""
    from torch.distributed.tensor.experimental._context_parallel import _attention as ring

    ops = _flash_cpu_ops()
    added = [op for op in ops if op not in ring.custom_ops]
    for op in added:
        ring.custom_ops[op] = _ring_flash_cpu
    try:
        yield
    finally:
        for op in added:
            ring.custom_ops.pop(op, None)


@contextlib.contextmanager
def _rotate_method(strategy: str) -> Iterator[None]:
    """Use ``strategy`` ("allgather" / "alltoall") to pass keys and values around the ring,
    and restore the previous method afterwards."""
    from torch.distributed.tensor.experimental._context_parallel import _attention as ring

    options = ring._cp_options
    previous = options.rotate_method
    ring.set_rotate_method(strategy)
    try:
        yield
    finally:
        options.rotate_method = previous


def _ring_backends(device_type: str) -> list[Any]:
    """SDPA backends that have a ring-attention path on ``device_type``."""
    from torch.nn.attention import SDPBackend

    if device_type == "cpu":
        return [SDPBackend.FLASH_ATTENTION]
    # CUDA: the kernels torch's context parallelism dispatches (not run on this project's CI).
    return [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION]


@contextlib.contextmanager
def context_parallel_scope(
    mesh: DeviceMesh,
    strategy: str,
    buffers: list[torch.Tensor],
    buffer_seq_dims: list[int],
    no_restore_buffers: set[torch.Tensor] | None,
) -> Iterator[None]:
    """Shard ``buffers`` in place along their sequence dimension over ``mesh`` (the ``cp``
    dimension) and run scaled-dot-product attention as ring attention inside the block.

    Args:
        mesh: The 1-D context-parallel mesh.
        strategy: ``"allgather"`` or ``"alltoall"`` (how keys and values travel).
        buffers: Tensors with a sequence dimension (inputs, labels, position ids ...).
        buffer_seq_dims: The sequence dimension of each buffer.
        no_restore_buffers: Buffers left sharded when the block ends.
    """
    from torch.distributed.tensor.experimental import context_parallel
    from torch.nn.attention import sdpa_kernel

    kernels = _cpu_ring_kernels() if mesh.device_type == "cpu" else contextlib.nullcontext()
    with contextlib.ExitStack() as stack:
        stack.enter_context(kernels)
        stack.enter_context(_rotate_method(strategy))
        stack.enter_context(sdpa_kernel(_ring_backends(mesh.device_type)))
        stack.enter_context(
            context_parallel(
                mesh,
                buffers=buffers,
                buffer_seq_dims=buffer_seq_dims,
                no_restore_buffers=no_restore_buffers or set(),
            )
        )
        yield


def drop_attention_masks(model: torch.nn.Module) -> None:
    """Make the ``self_attn`` modules of a ``transformers`` model attend causally without a
    mask (ring attention takes no mask): each call gets ``attention_mask=None`` and
    ``is_causal=True``.

    Raises:
        ValueError: for a model whose layers use a narrower mask than full causal attention
            (sliding-window or chunked layers), which ring attention cannot express.
    """
    config = getattr(model, "config", None)
    text_config = getattr(config, "get_text_config", None)
    if callable(text_config):
        config = text_config()
    layer_types = getattr(config, "layer_types", None)
    if layer_types is not None:
        narrower = sorted({t for t in layer_types if t != "full_attention"})
    else:
        narrower = ["sliding_attention"] if getattr(config, "sliding_window", None) else []
    if narrower:
        raise ValueError(
            "context parallelism computes full causal attention; got a model "
            f"({type(model).__name__}) with attention layers of type {narrower}, whose mask "
            "would be dropped. Use a model with full causal attention, or set cp_size=1."
        )
    for name, module in model.named_modules():
        if name.endswith("self_attn"):
            module.register_forward_pre_hook(_causal_without_mask, with_kwargs=True, prepend=True)


def _causal_without_mask(
    module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if "attention_mask" in kwargs:
        kwargs["attention_mask"] = None
        kwargs["is_causal"] = True
    return args, kwargs
