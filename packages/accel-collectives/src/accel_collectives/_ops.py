"""Collective operations on nested lists/tuples/dicts of tensors and on Python objects.

On one process every operation is local (``gather`` returns its input, ``reduce`` a copy ...).
With several processes each tensor takes exactly one collective of ``torch.distributed``:
``gather`` writes straight into the result with a single all-gather, ``reduce`` is one all-reduce
on a copy, ``pad_across_processes`` exchanges the sizes of every tensor of the structure in one
all-gather. On backends that only move device memory (nccl ...) tensors are moved to the
process's device first. XLA replicas use torch_xla's in-graph collectives instead.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from accel_state import PartialState
from accel_state.hang_watchdog import collective

from ._checks import verify_operation, verify_same_length
from ._nested import recursively_apply
from ._xla_ops import xla_all_reduce, xla_gather

# torch >= 2.10 names it all_gather_single and deprecates the older name (with a warning per
# call); both write every rank's tensor into one output tensor.
_all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

# Backends that only communicate tensors that live on the accelerator.
_DEVICE_BACKENDS = frozenset({"nccl", "xccl", "hccl", "cncl", "mccl"})

# Backends on which the single-tensor all-gather turned out to be unsupported.
_NO_SINGLE_GATHER: set[str] = set()

_REDUCTIONS = ("sum", "mean", "max", "min", "none")

_DEBUG_HINT = (
    " Run with ACCEL_DEBUG_MODE=1 to check, before each collective, what every process passes."
)


_state_cache: list[PartialState] = []


def _get_state() -> PartialState:
    """Return the process state, creating it on first use.

    Every ``PartialState`` shares one attribute dict, so one cached instance always shows the
    current state (also after a reset): only an uninitialised state needs a new instance.
    """
    if _state_cache and _state_cache[0].initialized:
        return _state_cache[0]
    state = PartialState()
    _state_cache[:] = [state]
    return state


def _comm_tensor(tensor: torch.Tensor, state: PartialState) -> torch.Tensor:
    """Return ``tensor`` where the backend can send it: detached from autograd, contiguous, and
    on the device if needed.

    Collectives write into their buffers in place, which autograd refuses for a parameter (a
    leaf that requires grad) and for views of one; the values moved are data, not part of a
    graph, so they travel detached. A contiguous tensor already on the right device is not
    copied (the result shares its memory).
    """
    if tensor.layout != torch.strided:
        raise TypeError(
            f"Collectives move dense tensors; got a tensor of layout {tensor.layout} and shape "
            f"{list(tensor.shape)}. Convert it first, e.g. tensor.to_dense()."
        )
    tensor = tensor.detach()
    if state.backend in _DEVICE_BACKENDS and tensor.device != state.device:
        tensor = tensor.to(state.device)
    if not tensor.is_contiguous():
        tensor = tensor.contiguous()
    return tensor


def _failure(operation: str, tensor: torch.Tensor, err: BaseException) -> RuntimeError:
    """The error for a collective that failed: the backend's own message first, then the tensor,
    then the usual causes (shapes are only one of them)."""
    return RuntimeError(
        f"{operation} failed on a tensor of shape {list(tensor.shape)}, dtype {tensor.dtype}, "
        f"device {tensor.device}: {type(err).__name__}: {err}. If the processes passed tensors "
        "of different shapes or dtypes, make them agree (pad_across_processes pads the first "
        "dimension); if the backend cannot move this dtype or device, convert the tensor first "
        "(e.g. tensor.float().cpu())." + _DEBUG_HINT
    )


def _check_source(operation: str, from_process: int, num_processes: int) -> None:
    if not 0 <= from_process < num_processes:
        raise ValueError(
            f"{operation}: from_process must be a process index in [0, {num_processes - 1}]; "
            f"got {from_process}. Pass the index of the process that holds the data."
        )


def _is_unsupported(err: Exception) -> bool:
    text = str(err).lower()
    return "support" in text or "not implemented" in text or "_allgather_base" in text


# --------------------------------------------------------------------------------- gather
def _gather_one(tensor: torch.Tensor, state: PartialState) -> torch.Tensor:
    if state.backend == "xla":
        return xla_gather(tensor, state.device)
    tensor = _comm_tensor(tensor, state)
    n = state.num_processes
    if tensor.ndim == 0:
        tensor = tensor.reshape(1)
    out = tensor.new_empty((n * tensor.shape[0], *tensor.shape[1:]))
    backend = state.backend
    try:
        if backend not in _NO_SINGLE_GATHER:
            try:
                with collective("gather", tensor):
                    _all_gather_single(out, tensor)
                return out
            except (RuntimeError, NotImplementedError) as err:
                if not _is_unsupported(err):
                    raise
                # Every process fails the same way before any data moves: fall back for good.
                _NO_SINGLE_GATHER.add(str(backend))
        # Each process's share is written straight into its slice of ``out``.
        with collective("gather", tensor):
            dist.all_gather(list(out.chunk(n)), tensor)
        return out
    except (RuntimeError, ValueError, TypeError) as err:
        raise _failure("gather", tensor, err) from err


def gather(tensor: Any) -> Any:
    """Gather the tensors of a nested list/tuple/dict from every process.

    Each tensor becomes the concatenation, along its first dimension and in process order, of
    that tensor on every process (a 0-d tensor becomes a 1-d tensor of ``num_processes``
    values). Every process receives the result. On a single process the input is returned as
    is.

    Args:
        tensor: A tensor or a nested list/tuple/dict of tensors, with the same structure, shapes
            and dtypes on every process.

    Returns:
        The same structure holding the gathered tensors.

    Raises:
        TypeError: if the structure holds something other than tensors (use
            [`gather_object`][accel_collectives.gather_object] for Python objects).
        DistributedOperationException: in debug mode, if the processes pass different
            structures, shapes or dtypes.

    Example:
        >>> gather(torch.tensor([state.process_index]))  # on 4 processes
        tensor([0, 1, 2, 3])
    """
    state = _get_state()
    if state.num_processes == 1:
        return tensor
    if state.debug:
        verify_operation(
            "gather",
            tensor,
            rule="every process must pass the same structure of tensors with the same shapes "
            "and dtypes",
            fix="Make the shapes agree before gathering, e.g. with "
            "pad_across_processes(tensor, dim=0).",
        )
    if isinstance(tensor, torch.Tensor):
        return _gather_one(tensor, state)
    return recursively_apply(_gather_one, tensor, state, error_on_other_type=True)


def gather_object(object: Any) -> list[Any]:
    """Gather a picklable object from every process into one flat list.

    A list passed by a process contributes its items; any other object contributes itself.
    The result lists the contributions in process order and every process receives it.

    Args:
        object: A picklable object (a list is concatenated, anything else wrapped).

    Returns:
        The list of every process's items. On a single process: the items of ``object`` if it
        is a list, else ``[object]``.

    Example:
        >>> gather_object([f"rank{state.process_index}"])  # on 2 processes
        ['rank0', 'rank1']
    """
    state = _get_state()
    if state.num_processes == 1:
        return list(object) if isinstance(object, list) else [object]
    received: list[Any] = [None] * state.num_processes
    with collective("gather_object", object):
        dist.all_gather_object(received, object)
    result: list[Any] = []
    for item in received:
        if isinstance(item, list):
            result.extend(item)
        else:
            result.append(item)
    return result


# ------------------------------------------------------------------------------ broadcast
def _broadcast_one(tensor: torch.Tensor, from_process: int, state: PartialState) -> torch.Tensor:
    buffer = _comm_tensor(tensor, state)
    try:
        with collective("broadcast", buffer):
            dist.broadcast(buffer, src=from_process)
    except (RuntimeError, ValueError, TypeError) as err:
        raise _failure("broadcast", tensor, err) from err
    if buffer.device != tensor.device:
        return buffer
    if buffer.data_ptr() != tensor.data_ptr() or buffer.stride() != tensor.stride():
        # A non-contiguous input: write the result back so the call stays in place (as an
        # optimizer writes a parameter: outside autograd).
        with torch.no_grad():
            tensor.copy_(buffer)
    return tensor


def broadcast(tensor: Any, from_process: int = 0) -> Any:
    """Copy the tensors of a nested list/tuple/dict from process ``from_process`` to every process.

    The tensors are overwritten in place (on device-only backends such as nccl a CPU tensor is
    first copied to the process's device and that copy is returned).

    Args:
        tensor: A tensor or a nested list/tuple/dict of tensors, with the same structure,
            shapes and dtypes on every process.
        from_process: Index of the process whose values are sent.

    Returns:
        The same structure holding ``from_process``'s values.

    Raises:
        ValueError: if ``from_process`` is not a process index.
        DistributedOperationException: in debug mode, if the processes pass different
            structures, shapes or dtypes.
    """
    state = _get_state()
    n = state.num_processes
    _check_source("broadcast", from_process, n)
    if n == 1:
        return tensor
    if state.debug:
        verify_operation(
            "broadcast",
            tensor,
            rule="every process must pass the same structure of tensors with the same shapes "
            "and dtypes",
            fix="Allocate receiving tensors of the sender's shapes and dtypes on every process.",
        )
    if isinstance(tensor, torch.Tensor):
        return _broadcast_one(tensor, from_process, state)
    return recursively_apply(_broadcast_one, tensor, from_process, state, error_on_other_type=True)


def broadcast_object_list(object_list: list[Any], from_process: int = 0) -> list[Any]:
    """Replace, in place, the items of ``object_list`` by those of process ``from_process``.

    Args:
        object_list: A list of picklable objects, of the same length on every process (the
            receivers' items are placeholders, e.g. ``[None] * n``).
        from_process: Index of the process whose objects are sent.

    Returns:
        ``object_list``, now holding ``from_process``'s objects.

    Raises:
        ValueError: if ``from_process`` is not a process index.
        DistributedOperationException: in debug mode, if the lists differ in length.
    """
    state = _get_state()
    n = state.num_processes
    _check_source("broadcast_object_list", from_process, n)
    if n == 1:
        return object_list
    if state.debug:
        verify_same_length("broadcast_object_list", object_list)
    with collective("broadcast_object_list"):
        dist.broadcast_object_list(object_list, src=from_process)
    return object_list


def copy_tensor_to_devices(tensor: torch.Tensor | None = None) -> torch.Tensor:
    """Copy a tensor that exists on one process only to every process.

    Unlike [`broadcast`][accel_collectives.broadcast], the receivers pass ``None`` and need not know the shape or dtype.
    When several processes pass a tensor, the lowest process index wins.

    Args:
        tensor: The tensor on the process that holds it, ``None`` on the others.

    Returns:
        The tensor, on every process.

    Raises:
        ValueError: if no process passes a tensor.
    """
    state = _get_state()
    if state.num_processes == 1:
        if tensor is None:
            raise ValueError(
                "copy_tensor_to_devices needs a tensor on at least one process; got None on "
                "the only process. Pass the tensor to copy."
            )
        return tensor
    meta = None if tensor is None else (tuple(tensor.shape), tensor.dtype)
    metas: list[Any] = [None] * state.num_processes
    with collective("copy_tensor_to_devices"):
        dist.all_gather_object(metas, meta)
    holders = [rank for rank, m in enumerate(metas) if m is not None]
    if not holders:
        raise ValueError(
            "copy_tensor_to_devices needs a tensor on at least one process; every process "
            "passed None. Pass the tensor on the process that holds it."
        )
    source = holders[0]
    if state.process_index == source:
        assert tensor is not None
        buffer = _comm_tensor(tensor, state)
    else:
        shape, dtype = metas[source]
        device = state.device if state.backend in _DEVICE_BACKENDS else torch.device("cpu")
        buffer = torch.empty(shape, dtype=dtype, device=device)
    with collective("copy_tensor_to_devices", buffer):
        dist.broadcast(buffer, src=source)
    return buffer


# --------------------------------------------------------------------------------- reduce
_REDUCE_OPS = {"max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}


def _reduce_one(
    tensor: torch.Tensor, reduction: str, scale: float, state: PartialState
) -> torch.Tensor:
    n = state.num_processes
    if n > 1 and reduction != "none" and state.backend == "xla":
        out = xla_all_reduce(tensor, reduction, state.device)
    elif n > 1 and reduction != "none":
        moved = _comm_tensor(tensor, state)
        # Reduce into a copy: the caller's tensor is left alone.
        out = moved.clone() if moved.data_ptr() == tensor.data_ptr() else moved
        try:
            with collective("reduce", out):
                dist.all_reduce(out, _REDUCE_OPS.get(reduction, dist.ReduceOp.SUM))
        except (RuntimeError, ValueError, TypeError) as err:
            raise _failure("reduce", tensor, err) from err
    else:
        out = tensor.detach().clone(memory_format=torch.contiguous_format)
    exact = out.is_floating_point() or out.is_complex()
    if reduction == "mean" and (n > 1 or not exact):
        out = out.div_(n) if exact else out / n
    if scale != 1.0:
        out = out.mul_(scale) if exact else out * scale
    return out


def reduce(tensor: Any, reduction: str = "mean", scale: float = 1.0) -> Any:
    """Reduce the tensors of a nested list/tuple/dict across every process.

    Every process receives the result; the inputs are not modified.

    Args:
        tensor: A tensor or a nested list/tuple/dict of tensors, with the same structure,
            shapes and dtypes on every process.
        reduction: ``"mean"`` (sum divided by the number of processes; integer tensors give
            floating-point means), ``"sum"``, ``"max"``, ``"min"`` (element-wise across
            processes), or ``"none"`` (a copy of the local tensors).
        scale: A factor applied to the result after the reduction.

    Returns:
        The same structure holding the reduced tensors.

    Raises:
        ValueError: if ``reduction`` is not one of ``"sum"``, ``"mean"``, ``"max"``,
            ``"min"``, ``"none"``.
        DistributedOperationException: in debug mode, if the processes pass different
            structures, shapes or dtypes.

    Example:
        >>> reduce(torch.arange(2) + 1 + 2 * state.process_index, reduction="sum")  # 2 processes
        tensor([4, 6])
    """
    if reduction not in _REDUCTIONS:
        raise ValueError(
            f"reduce: reduction must be one of {list(_REDUCTIONS)}; got {reduction!r}. "
            'Use "mean", "sum", "max", "min" or "none".'
        )
    state = _get_state()
    if state.debug and state.num_processes > 1:
        verify_operation(
            "reduce",
            tensor,
            rule="every process must pass the same structure of tensors with the same shapes "
            "and dtypes",
            fix="Make the shapes agree before reducing (reduce works element by element).",
        )
    if isinstance(tensor, torch.Tensor):
        return _reduce_one(tensor, reduction, scale, state)
    return recursively_apply(_reduce_one, tensor, reduction, scale, state, error_on_other_type=True)
