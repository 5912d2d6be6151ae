"""FSDP2 gradient reduce-scatter on gloo process groups: one ``all_to_all_single`` and a local
sum instead of torch's gloo ``reduce_scatter_tensor``.

torch implements ``reduce_scatter_tensor`` for gloo as an ``all_reduce`` of the whole input
followed by a copy of this process's chunk: every process sends and receives the full gradient
of the unit (a ring all-reduce moves ``2 (N-1)/N`` of it) and keeps ``1/N``. An all-to-all sends
each process only the chunk it keeps (``(N-1)/N`` of the input), which is the least a
reduce-scatter must move; the sum of the ``N`` received chunks is then one pass over the input
on the CPU. On 2 processes this halves the bytes of every reduce-scatter and, measured in
``benchmarks/engines/bench_fsdp_profile.py``, about halves its time.

The result is the same sum: on 2 processes bit for bit (``a + b`` is exact either way round), on
more processes up to the order of the fp32 additions. Memory: one receive buffer the size of the
unit's gradient, for the duration of the call (torch's gloo path also copies the input once).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

_SUMMING_OPS = {"SUM": False, "AVG": True}
"""Reduce ops this path computes, and whether the sum is then divided by the group size."""


def _op_name(op: Any) -> str | None:
    """``"SUM"`` / ``"AVG"`` for those ops (as ``ReduceOp`` or ``RedOpType``), else None."""
    for name in _SUMMING_OPS:
        try:
            if op == getattr(dist.ReduceOp, name):
                return name
        except TypeError:  # a ReduceOp carrying a factor (PREMUL_SUM) compares to nothing
            return None
    return None


class AllToAllReduceScatter:
    """A reduce-scatter for ``FSDPModule.set_custom_reduce_scatter``: each process sends every
    other process the chunk that process keeps, then sums what it received.

    Ops other than ``SUM`` / ``AVG`` (a ``PREMUL_SUM`` from ``set_gradient_divide_factor``) and
    asynchronous calls go to torch's ``reduce_scatter_tensor`` unchanged.
    """

    def allocate(
        self, size: tuple[int, ...], *, dtype: torch.dtype, device: torch.device
    ) -> torch.Tensor:
        """A buffer for FSDP's reduce-scatter input or output (plain CPU memory)."""
        return torch.empty(*size, dtype=dtype, device=device)

    def __call__(
        self,
        output_tensor: torch.Tensor,
        input_tensor: torch.Tensor,
        group: dist.ProcessGroup,
        op: Any,
        async_op: bool = False,
    ) -> dist.Work | None:
        """Reduce ``input_tensor`` (the concatenation of one chunk per process) over ``group``
        and leave this process's chunk in ``output_tensor``."""
        name = _op_name(op)
        world = group.size()
        if name is None or async_op or input_tensor.numel() != world * output_tensor.numel():
            return dist.reduce_scatter_tensor(
                output_tensor, input_tensor, op=op, group=group, async_op=async_op
            )
        received = torch.empty_like(input_tensor)
        dist.all_to_all_single(received, input_tensor.contiguous(), group=group)
        torch.sum(received.view(world, -1), dim=0, out=output_tensor.view(-1))
        if _SUMMING_OPS[name]:
            output_tensor.div_(world)
        return None


def uses_gloo(group: dist.ProcessGroup) -> bool:
    """Whether collectives on ``group`` run on gloo (CPU tensors)."""
    try:
        return "gloo" in str(dist.get_backend(group)).lower()
    except (RuntimeError, ValueError):  # not a process group of this process
        return False


def install_gloo_reduce_scatter(modules: list[torch.nn.Module], group: dist.ProcessGroup) -> bool:
    """Give each FSDP2 module the all-to-all reduce-scatter when ``group`` (the group gradients
    are reduce-scattered over) runs on gloo.

    Returns:
        Whether it was installed (not on a torch whose FSDP2 modules lack
        ``set_custom_reduce_scatter``: those keep torch's own reduce-scatter).
    """
    if group.size() < 2 or not uses_gloo(group):
        return False
    if not all(hasattr(module, "set_custom_reduce_scatter") for module in modules):
        return False
    comm = AllToAllReduceScatter()
    for module in modules:
        module.set_custom_reduce_scatter(comm)  # type: ignore[operator]
    return True
