"""Walking nested lists, tuples and dicts of tensors, and the local (no communication) helpers."""

from __future__ import annotations

import copy
import dataclasses
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any

import torch


@dataclasses.dataclass
class TensorInformation:
    """Shape and dtype of a tensor, without its data."""

    shape: torch.Size
    """Shape of the tensor."""
    dtype: torch.dtype
    """Data type of the tensor."""


def is_torch_tensor(tensor: Any) -> bool:
    """Return whether ``tensor`` is a ``torch.Tensor``."""
    return isinstance(tensor, torch.Tensor)


def is_tensor_information(tensor_info: Any) -> bool:
    """Return whether ``tensor_info`` is a [`TensorInformation`][accel_collectives.TensorInformation]."""
    return isinstance(tensor_info, TensorInformation)


def is_namedtuple(data: Any) -> bool:
    """Return whether ``data`` is an instance of a ``collections.namedtuple`` class."""
    return isinstance(data, tuple) and hasattr(data, "_fields") and hasattr(data, "_asdict")


def honor_type(obj: Sequence[Any], generator: Iterable[Any]) -> Any:
    """Build an object of the type of ``obj`` (list, tuple, namedtuple ...) from ``generator``.

    Args:
        obj: The list or tuple whose type is kept.
        generator: The new elements, in order.

    Returns:
        A new object of ``type(obj)`` holding the elements of ``generator``.
    """
    kind: Any = type(obj)
    if is_namedtuple(obj):
        return kind(*list(generator))
    return kind(generator)


def rebuild_mapping(data: Mapping[Any, Any], items: Mapping[Any, Any] | Iterable[Any]) -> Any:
    """Build a mapping of the type of ``data`` (dict, OrderedDict, BatchEncoding ...) from ``items``.

    ``defaultdict`` keeps its default factory. A mapping class whose constructor does not take a
    dict is copied and refilled when it is mutable.

    Args:
        data: The mapping whose type is kept.
        items: The new ``(key, value)`` pairs, or a dict of them.

    Returns:
        A new mapping of ``type(data)``.

    Raises:
        TypeError: if the type can neither be built from a dict nor copied and refilled.
    """
    kind: Any = type(data)
    if kind is dict:
        return dict(items)
    if isinstance(data, defaultdict):
        return kind(data.default_factory, items)
    try:
        return kind(items)
    except TypeError:
        if not isinstance(data, MutableMapping):
            raise TypeError(
                f"a nested mapping must be rebuildable as {kind.__name__}(dict) or be mutable; "
                f"{kind.__name__} is neither. Convert it to a dict before this operation."
            ) from None
    rebuilt = copy.copy(data)
    rebuilt.clear()
    rebuilt.update(items)
    return rebuilt


def recursively_apply(
    func: Callable[..., Any],
    data: Any,
    *args: Any,
    test_type: Callable[[Any], bool] = is_torch_tensor,
    error_on_other_type: bool = False,
    **kwargs: Any,
) -> Any:
    """Apply ``func`` to every leaf of a nested list/tuple/dict that passes ``test_type``.

    Lists, tuples, namedtuples and mappings (including ``Mapping`` subclasses such as
    ``transformers.BatchEncoding``) are rebuilt with their own type.

    Args:
        func: The function applied to each matching leaf, as ``func(leaf, *args, **kwargs)``.
        data: The nested structure.
        *args: Extra positional arguments of ``func``.
        test_type: Tells which leaves ``func`` applies to (default: tensors).
        error_on_other_type: Raise a ``TypeError`` on a leaf that fails ``test_type`` instead of
            returning it unchanged.
        **kwargs: Extra keyword arguments of ``func``.

    Returns:
        The same structure with ``func`` applied to its matching leaves.

    Raises:
        TypeError: if ``error_on_other_type`` and a leaf fails ``test_type``.
    """
    if isinstance(data, (tuple, list)):
        return honor_type(
            data,
            (
                recursively_apply(
                    func,
                    o,
                    *args,
                    test_type=test_type,
                    error_on_other_type=error_on_other_type,
                    **kwargs,
                )
                for o in data
            ),
        )
    if isinstance(data, Mapping):
        return rebuild_mapping(
            data,
            {
                k: recursively_apply(
                    func,
                    v,
                    *args,
                    test_type=test_type,
                    error_on_other_type=error_on_other_type,
                    **kwargs,
                )
                for k, v in data.items()
            },
        )
    if test_type(data):
        return func(data, *args, **kwargs)
    if error_on_other_type:
        # The reference's text, word for word: code written for it compares the whole message.
        name = getattr(func, "__name__", repr(func))
        raise TypeError(
            f"Unsupported types ({type(data)}) passed to `{name}`. Only nested list/tuple/dicts "
            f"of objects that are valid for `{getattr(test_type, '__name__', test_type)}` "
            "should be passed."
        )
    return data


def iter_leaves(data: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Yield ``(path, leaf)`` for every leaf of a nested structure, depth first, in order.

    The path reads like the indexing that reaches the leaf: ``['input_ids'][0]``.
    """
    if isinstance(data, (tuple, list)):
        for i, item in enumerate(data):
            yield from iter_leaves(item, f"{path}[{i}]")
    elif isinstance(data, Mapping):
        for key, item in data.items():
            yield from iter_leaves(item, f"{path}[{key!r}]")
    else:
        yield path, data


def send_to_device(
    tensor: Any,
    device: torch.device | str | int,
    non_blocking: bool = False,
    skip_keys: list[str] | str | None = None,
) -> Any:
    """Move every tensor of a nested list/tuple/dict to ``device``.

    Objects that are not tensors but have a ``to`` method (for instance
    ``transformers.BatchEncoding``) are moved with it; other objects are returned unchanged.

    Args:
        tensor: The nested structure.
        device: The target device.
        non_blocking: Copy asynchronously when the source is pinned memory.
        skip_keys: Keys of mappings whose values stay where they are.

    Returns:
        The same structure with its tensors on ``device``.
    """
    if isinstance(tensor, torch.Tensor):
        return tensor.to(device, non_blocking=non_blocking)
    if isinstance(skip_keys, str):
        skip_keys = [skip_keys]
    if isinstance(tensor, (tuple, list)):
        return honor_type(
            tensor,
            (
                send_to_device(t, device, non_blocking=non_blocking, skip_keys=skip_keys)
                for t in tensor
            ),
        )
    if isinstance(tensor, Mapping) and (skip_keys or not callable(getattr(tensor, "to", None))):
        skip = set(skip_keys or ())
        return rebuild_mapping(
            tensor,
            {
                k: v
                if k in skip
                else send_to_device(v, device, non_blocking=non_blocking, skip_keys=skip_keys)
                for k, v in tensor.items()
            },
        )
    mover = getattr(tensor, "to", None)
    if callable(mover):
        try:
            return mover(device, non_blocking=non_blocking)
        except TypeError:
            return mover(device)
    return tensor


def get_data_structure(data: Any) -> Any:
    """Replace every tensor of a nested structure by its [`TensorInformation`][accel_collectives.TensorInformation]."""
    return recursively_apply(lambda t: TensorInformation(shape=t.shape, dtype=t.dtype), data)


def get_shape(data: Any) -> Any:
    """Replace every tensor of a nested structure by its shape as a list of ints."""
    return recursively_apply(lambda t: list(t.shape), data)


def initialize_tensors(data_structure: Any) -> Any:
    """Allocate an uninitialised tensor for every [`TensorInformation`][accel_collectives.TensorInformation] of a structure.

    The inverse of [`get_data_structure`][accel_collectives.get_data_structure] (without the data).
    """
    return recursively_apply(
        lambda info: torch.empty(info.shape, dtype=info.dtype),
        data_structure,
        test_type=is_tensor_information,
    )


def find_batch_size(data: Any) -> int:
    """Return the size of the first dimension of the first tensor of a nested structure.

    Raises:
        ValueError: if a list, tuple or dict on the way is empty.
        TypeError: if the first leaf is not a tensor.
    """
    if isinstance(data, (tuple, list, Mapping)) and len(data) == 0:
        raise ValueError(
            f"find_batch_size needs a non-empty structure; got an empty {type(data).__name__}. "
            "Pass a batch that holds at least one tensor."
        )
    if isinstance(data, (tuple, list)):
        return find_batch_size(data[0])
    if isinstance(data, Mapping):
        return find_batch_size(next(iter(data.values())))
    if not isinstance(data, torch.Tensor):
        raise TypeError(
            "find_batch_size reads the first dimension of the first tensor; the first leaf is "
            f"a {type(data).__name__}. Put a tensor first in the batch."
        )
    if data.ndim == 0:
        raise TypeError(
            "find_batch_size reads the first dimension of the first tensor; the first tensor "
            "is 0-dimensional. Put a batched tensor first in the batch."
        )
    return int(data.shape[0])


def ignorant_find_batch_size(data: Any) -> int | None:
    """Like [`find_batch_size`][accel_collectives.find_batch_size], but return None when no batch size can be found."""
    try:
        return find_batch_size(data)
    except (ValueError, TypeError):
        return None


def find_device(data: Any) -> torch.device | None:
    """Return the device of the first tensor of a nested structure (None if it holds none)."""
    if isinstance(data, Mapping):
        data = list(data.values())
    if isinstance(data, (tuple, list)):
        for item in data:
            device = find_device(item)
            if device is not None:
                return device
        return None
    if isinstance(data, torch.Tensor):
        return data.device
    return None


def _to_list(tensor: torch.Tensor) -> Any:
    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        # Python lists have no bfloat16; widen first (exactly representable).
        tensor = tensor.float()
    return tensor.tolist()


def listify(data: Any) -> Any:
    """Turn every tensor of a nested structure into (nested) Python lists of numbers."""
    return recursively_apply(_to_list, data)


def _is_half(tensor: Any) -> bool:
    return isinstance(tensor, torch.Tensor) and tensor.dtype in (torch.float16, torch.bfloat16)


def convert_to_fp32(tensor: Any) -> Any:
    """Convert every float16/bfloat16 tensor of a nested structure to float32.

    Tensors of other dtypes and non-tensor objects are returned unchanged.
    """
    return recursively_apply(lambda t: t.float(), tensor, test_type=_is_half)


def slice_tensors(
    data: Any,
    tensor_slice: Any,
    process_index: int | None = None,
    num_processes: int | None = None,
) -> Any:
    """Index every tensor of a nested structure with ``tensor_slice`` (``tensor[tensor_slice]``).

    Args:
        data: The nested structure.
        tensor_slice: A slice, index or tuple of them.
        process_index: Accepted for compatibility with the reference API; not used.
        num_processes: Accepted for compatibility with the reference API; not used.
    """
    return recursively_apply(lambda t: t[tensor_slice], data)


def concatenate(data: list[Any], dim: int = 0) -> Any:
    """Concatenate a list of nested structures of tensors leaf by leaf along ``dim``.

    Every element of ``data`` must have the structure of ``data[0]``. A single batch needs no
    joining: its non-tensor leaves (strings, numbers ...) come back unchanged.

    Args:
        data: A non-empty list of nested lists/tuples/dicts of tensors.
        dim: The dimension along which tensors are concatenated.

    Raises:
        ValueError: if ``data`` is empty.
        TypeError: if a leaf of two or more batches is not a tensor.
    """
    if len(data) == 0:
        raise ValueError(
            "concatenate needs a non-empty list of structures; got an empty list. "
            "Pass at least one structure."
        )
    first = data[0]
    if isinstance(first, (tuple, list)):
        return honor_type(
            first, (concatenate([d[i] for d in data], dim=dim) for i in range(len(first)))
        )
    if isinstance(first, Mapping):
        return rebuild_mapping(
            first, {k: concatenate([d[k] for d in data], dim=dim) for k in first}
        )
    if not isinstance(first, torch.Tensor):
        if len(data) == 1:
            return first
        raise TypeError(
            "concatenate only joins nested lists/tuples/dicts of tensors; found a "
            f"{type(first).__name__}. Remove non-tensor values first."
        )
    return torch.cat(data, dim=dim)


def _pad_batch(tensor: torch.Tensor, batch_size: int, num_processes: int, dim: int) -> torch.Tensor:
    size = tensor.shape[dim]
    target = -(-batch_size // num_processes) * num_processes
    if target <= size:
        return tensor
    shape = list(tensor.shape)
    shape[dim] = target - size
    return torch.cat([tensor, tensor.new_zeros(shape)], dim=dim)


def pad_input_tensors(tensor: Any, batch_size: int, num_processes: int, dim: int = 0) -> Any:
    """Pad every tensor of a nested structure with zeros so its batch splits evenly.

    Each tensor grows in ``dim`` to the smallest multiple of ``num_processes`` that is at
    least ``batch_size`` (e.g. a batch of 3 for 4 processes becomes 4 rows, the last one zeros),
    so that every process gets the same number of rows.

    Args:
        tensor: A tensor or a nested list/tuple/dict of tensors.
        batch_size: The size of the batch in ``dim``.
        num_processes: The number of processes the batch is split across.
        dim: The batch dimension.

    Returns:
        The same structure holding the padded tensors.

    Raises:
        ValueError: if ``num_processes`` is not positive.
        TypeError: if the structure holds something other than tensors.
    """
    if num_processes < 1:
        raise ValueError(
            f"pad_input_tensors: num_processes must be at least 1; got {num_processes!r}. "
            "Pass the number of processes the batch is split across."
        )
    return recursively_apply(
        _pad_batch, tensor, batch_size, num_processes, dim, error_on_other_type=True
    )
