"""Differential tests: behaviours of code written for the reference library (``accelerate``)
that must be the same on accel, fed the same inputs on both sides.

Every difference that remains is deliberate and listed in ``docs/migration-behaviour.md``; the
assertions that check accel's side of such a difference name the entry.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict, namedtuple
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader

reference = pytest.importorskip(
    "accelerate", reason="the reference library is not installed (uv sync --group bench)"
)

import accel  # noqa: E402
import accel_collectives  # noqa: E402
from accel_state import AcceleratorState, GradientState  # noqa: E402
from accelerate.utils import operations as ref_ops  # noqa: E402

Pair = namedtuple("Pair", "a b")


def _outcome(func: Any, *args: Any, **kwargs: Any) -> tuple[str, Any, list[type]]:
    """What a call did: ("ok", result, warning classes) or ("raise", exception type, [])."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = func(*args, **kwargs)
        except Exception as error:  # the type is what is compared
            return "raise", type(error), []
    return "ok", result, [w.category for w in caught]


def _same(left: Any, right: Any) -> bool:
    if isinstance(left, torch.Tensor) or isinstance(right, torch.Tensor):
        return (
            isinstance(left, torch.Tensor)
            and isinstance(right, torch.Tensor)
            and left.dtype == right.dtype
            and left.shape == right.shape
            and bool(torch.equal(left, right))
        )
    if type(left) is not type(right):
        # The two libraries' own record types (TensorInformation): same name, same fields.
        return type(left).__name__ == type(right).__name__ and repr(left) == repr(right)
    if isinstance(left, (list, tuple)):
        return len(left) == len(right) and all(map(_same, left, right))
    if isinstance(left, dict):
        return list(left) == list(right) and all(_same(left[k], right[k]) for k in left)
    return bool(left == right)


def _compare(name: str, *args: Any, **kwargs: Any) -> None:
    ours = _outcome(getattr(accel_collectives, name), *args, **kwargs)
    theirs = _outcome(getattr(ref_ops, name), *args, **kwargs)
    assert ours[0] == theirs[0], (name, ours, theirs)
    if ours[0] == "raise":
        assert ours[1] is theirs[1] or issubclass(ours[1], theirs[1]), (name, ours, theirs)
        return
    assert _same(ours[1], theirs[1]), (name, ours[1], theirs[1])
    assert [w.__name__ for w in ours[2] if "Nested" in w.__name__] == [
        w.__name__ for w in theirs[2] if "Nested" in w.__name__
    ]


@pytest.fixture(autouse=True)
def _fresh_states():
    from accelerate.state import AcceleratorState as RefState
    from accelerate.state import GradientState as RefGradient

    for reset in (
        lambda: AcceleratorState._reset_state(reset_partial_state=True),
        GradientState._reset_state,
        lambda: RefState._reset_state(reset_partial_state=True),
        RefGradient._reset_state,
    ):
        reset()
    yield
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    RefState._reset_state(reset_partial_state=True)
    RefGradient._reset_state()


# ------------------------------------------------------------------------- nested operations
NESTED = [
    torch.arange(6.0).view(2, 3),
    [torch.ones(2), "text", 3, None],
    {"ids": torch.arange(4), "name": "a", "n": 1.5},
    OrderedDict(x=torch.zeros(1, 2), y=(torch.ones(3), "s")),
    Pair(torch.arange(3), 7),
    (torch.tensor(2.0), [torch.ones(2, 2), {"deep": torch.arange(2)}]),
]


@pytest.mark.parametrize("data", NESTED, ids=range(len(NESTED)))
def test_structure_operations_match(data: Any):
    _compare("recursively_apply", lambda t: t * 2, data)
    _compare("send_to_device", data, "cpu")
    _compare("convert_to_fp32", data)
    _compare("listify", data)
    _compare("get_data_structure", data)
    _compare("find_device", data)
    _compare("gather", data)
    _compare("broadcast", data)


BATCHES = [
    torch.ones(5, 2),
    [torch.ones(3), "x"],
    {"a": torch.ones(4, 1), "b": "s"},
    Pair(torch.ones(2), 1),
    [[torch.ones(6)]],
    ["x", torch.ones(3)],
    {"s": "a", "t": torch.ones(2)},
    [],
    {},
    None,
    5,
]


@pytest.mark.parametrize("batch", BATCHES, ids=range(len(BATCHES)))
def test_find_batch_size_matches(batch: Any):
    _compare("find_batch_size", batch)
    _compare("ignorant_find_batch_size", batch)


def test_find_batch_size_of_a_scalar_is_a_listed_difference():
    # migration-behaviour.md, "find_batch_size of a 0-dimensional tensor".
    with pytest.raises(IndexError):
        ref_ops.find_batch_size(torch.tensor(1.0))
    with pytest.raises(TypeError, match="0-dimensional"):
        accel_collectives.find_batch_size(torch.tensor(1.0))
    assert accel_collectives.ignorant_find_batch_size(torch.tensor(1.0)) is None


CONCATENATIONS = [
    [torch.ones(2, 3), torch.zeros(1, 3)],
    [[torch.ones(1), torch.ones(2)], [torch.zeros(2), torch.zeros(1)]],
    [
        {"a": torch.ones(1, 2), "b": (torch.ones(1),)},
        {"a": torch.zeros(2, 2), "b": (torch.ones(3),)},
    ],
    [Pair(torch.ones(1), torch.ones(1)), Pair(torch.zeros(2), torch.zeros(1))],
    [["a", torch.ones(1)], ["b", torch.ones(1)]],
    [{"x": torch.ones(1), "n": 1}, {"x": torch.ones(1), "n": 2}],
    [None, None],
]


@pytest.mark.parametrize("data", CONCATENATIONS, ids=range(len(CONCATENATIONS)))
def test_concatenate_matches(data: list[Any]):
    _compare("concatenate", data)
    _compare("concatenate", data, dim=0)


def test_concatenate_of_nothing_is_a_listed_difference():
    # migration-behaviour.md, "concatenate([])".
    with pytest.raises(IndexError):
        ref_ops.concatenate([])
    with pytest.raises(ValueError, match="non-empty list"):
        accel_collectives.concatenate([])


@pytest.mark.parametrize(
    "obj, items",
    [
        ([1, 2], [3]),
        ((1,), ["a", "b"]),
        (Pair(1, 2), [3, 4]),
        ([], []),
    ],
)
def test_honor_type_matches(obj: Any, items: list[Any]):
    ours = accel_collectives.honor_type(obj, iter(items))
    theirs = ref_ops.honor_type(obj, iter(items))
    assert _same(ours, theirs)


PADDED = [
    torch.arange(6).view(2, 3),
    [torch.ones(2), {"a": torch.zeros(3, 1)}],
    torch.tensor(3.0),
]


@pytest.mark.parametrize("data", PADDED, ids=range(len(PADDED)))
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_pad_across_processes_on_one_process_matches(data: Any, dim: int):
    from accel_state import PartialState
    from accelerate import PartialState as RefPartialState

    RefPartialState(cpu=True)
    PartialState(cpu=True)
    _compare("pad_across_processes", data, dim=dim)
    _compare("pad_across_processes", data, dim=dim, pad_index=-1, pad_first=True)


def test_pad_across_processes_warns_on_nested_tensors_with_the_reference_class():
    from accel_state import PartialState
    from accelerate import PartialState as RefPartialState

    RefPartialState(cpu=True)
    PartialState(cpu=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's prototype notice for nested tensors
        nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
    for data in (nested, {"n": nested, "t": torch.ones(2)}):
        with pytest.warns(accel_collectives.CannotPadNestedTensorWarning):
            out = accel_collectives.pad_across_processes(data)
        with pytest.warns(ref_ops.CannotPadNestedTensorWarning):
            ref_ops.pad_across_processes(data)
        assert out is data


def test_pad_across_processes_passes_non_tensors_through_as_listed():
    # migration-behaviour.md, "pad_across_processes with non-tensor leaves".
    from accel_state import PartialState
    from accelerate import PartialState as RefPartialState

    RefPartialState(cpu=True)
    PartialState(cpu=True)
    data = {"name": "a", "t": torch.ones(2)}
    with pytest.raises(TypeError):
        ref_ops.pad_across_processes(data)
    assert accel_collectives.pad_across_processes(data) is data


# ----------------------------------------------------------------------------- Accelerator
def _training_objects() -> list[Any]:
    model = nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    return [model, optimizer, scheduler, DataLoader(list(range(6)), batch_size=2)]


def _registered(accelerator: Any) -> list[int]:
    return [
        len(accelerator._models),
        len(accelerator._optimizers),
        len(accelerator._schedulers),
        len(accelerator._dataloaders),
    ]


@pytest.mark.parametrize("library", ["accel", "accelerate"])
def test_prepare_twice_returns_the_same_objects_registered_once(library: str):
    module = accel if library == "accel" else reference
    accelerator = module.Accelerator(cpu=True)
    first = accelerator.prepare(*_training_objects())
    second = accelerator.prepare(*first)
    assert all(a is b for a, b in zip(first, second, strict=True))
    assert _registered(accelerator) == [1, 1, 1, 1]
    assert accelerator.prepare_model(first[0]) is first[0]
    assert accelerator.prepare_data_loader(first[3]) is first[3]
    assert _registered(accelerator) == [1, 1, 1, 1]


@pytest.mark.parametrize("library", ["accel", "accelerate"])
def test_unwrap_model_of_compiled_data_parallel(library: str):
    module = accel if library == "accel" else reference
    accelerator = module.Accelerator(cpu=True)
    model = nn.Linear(2, 2)
    assert accelerator.unwrap_model(nn.DataParallel(model)) is model
    compiled = torch.compile(nn.DataParallel(model))
    kept = accelerator.unwrap_model(compiled, keep_torch_compile=True)
    assert kept is compiled and compiled._orig_mod is model
    assert accelerator.unwrap_model(compiled, keep_torch_compile=False) is model


@pytest.mark.parametrize("library", ["accel", "accelerate"])
def test_register_for_checkpointing_refuses_objects_without_state_dict(library: str):
    module = accel if library == "accel" else reference
    accelerator = module.Accelerator(cpu=True)
    with pytest.raises(ValueError):
        accelerator.register_for_checkpointing(object())
