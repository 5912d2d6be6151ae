"""Local helpers on nested lists/tuples/dicts of tensors (no communication)."""

from __future__ import annotations

import collections
from collections import OrderedDict, defaultdict
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import torch

import accel_collectives as ac

Pair = collections.namedtuple("Pair", "x y")


class Batch(collections.UserDict):
    """A Mapping subclass that is not a dict and has a ``to`` method, like BatchEncoding."""

    moved_to: Any = None

    def to(self, device: Any, non_blocking: bool = False) -> Batch:
        self.moved_to = device
        self.data = {
            k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in self.data.items()
        }
        return self


class Frozen(Mapping):
    """A read-only mapping whose constructor takes keyword-only arguments."""

    def __init__(self, *, items: dict[str, Any]) -> None:
        self._items = dict(items)

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


class KeywordDict(dict):
    """A mutable mapping whose constructor cannot take a dict positionally."""

    def __init__(self, *, tag: str) -> None:
        super().__init__()
        self.tag = tag


def test_recursively_apply_keeps_every_container_type() -> None:
    data = {
        "l": [torch.ones(1), "s"],
        "t": (torch.ones(2),),
        "p": Pair(torch.ones(1), 3),
        "o": OrderedDict(a=torch.ones(1)),
        "b": Batch({"ids": torch.ones(1)}),
    }
    out = ac.recursively_apply(lambda t, k, m=1: t * k * m, data, 2, m=3)
    assert type(out["l"]) is list and out["l"][1] == "s"
    assert torch.equal(out["l"][0], torch.tensor([6.0]))
    assert type(out["t"]) is tuple and torch.equal(out["t"][0], torch.full((2,), 6.0))
    assert type(out["p"]) is Pair and out["p"].y == 3 and out["p"].x.item() == 6
    assert type(out["o"]) is OrderedDict and out["o"]["a"].item() == 6
    assert type(out["b"]) is Batch and out["b"]["ids"].item() == 6


def test_recursively_apply_defaultdict_keeps_factory() -> None:
    data = defaultdict(list, {"a": torch.ones(1)})
    out = ac.recursively_apply(lambda t: t + 1, data)
    assert type(out) is defaultdict and out.default_factory is list
    assert out["a"].item() == 2 and out["missing"] == []


def test_recursively_apply_mapping_rebuild_fallbacks() -> None:
    mutable = KeywordDict(tag="x")
    mutable["a"] = torch.ones(1)
    out = ac.recursively_apply(lambda t: t + 1, mutable)
    assert type(out) is KeywordDict and out.tag == "x" and out["a"].item() == 2
    assert mutable["a"].item() == 1  # the input is not modified
    with pytest.raises(TypeError, match="Convert it to a dict"):
        ac.recursively_apply(lambda t: t, Frozen(items={"a": torch.ones(1)}))


def test_recursively_apply_error_on_other_type() -> None:
    with pytest.raises(TypeError, match="<class 'str'>"):
        ac.recursively_apply(lambda t: t, [torch.ones(1), "s"], error_on_other_type=True)
    out = ac.recursively_apply(
        lambda x: x + 1, [1, "a", 2.5], test_type=lambda x: isinstance(x, int)
    )
    assert out == [2, "a", 2.5]


@pytest.mark.filterwarnings("ignore:To copy construct from a tensor")
def test_recursively_apply_error_text_is_the_reference_text() -> None:
    # Code written for the reference compares the whole text of this error.
    with pytest.raises(TypeError) as info:
        ac.recursively_apply(torch.tensor, (torch.tensor(1), 1), error_on_other_type=True)
    assert str(info.value) == (
        "Unsupported types (<class 'int'>) passed to `tensor`. Only nested list/tuple/dicts of "
        "objects that are valid for `is_torch_tensor` should be passed."
    )


def test_honor_type() -> None:
    assert ac.honor_type((1, 2), (x * 2 for x in (1, 2))) == (2, 4)
    assert ac.honor_type(Pair(1, 2), iter([3, 4])) == Pair(3, 4)
    assert ac.honor_type([1], iter([5])) == [5]
    assert ac.is_namedtuple(Pair(1, 2)) and not ac.is_namedtuple((1, 2))


def test_send_to_device() -> None:
    data = {"a": [torch.ones(1)], "keep": torch.ones(1), "n": 3, "p": Pair(torch.ones(1), None)}
    out = ac.send_to_device(data, "meta", skip_keys="keep")
    assert out["a"][0].device.type == "meta" and out["p"].x.device.type == "meta"
    assert out["keep"].device.type == "cpu" and out["n"] == 3 and out["p"].y is None
    batch = Batch({"ids": torch.ones(1)})
    moved = ac.send_to_device(batch, "meta")
    assert moved.moved_to == "meta" and moved["ids"].device.type == "meta"
    # skip_keys on a Mapping with a ``to`` method rebuilds it instead.
    out = ac.send_to_device(
        Batch({"ids": torch.ones(1), "x": torch.ones(1)}), "meta", skip_keys=["x"]
    )
    assert type(out) is Batch and out["ids"].device.type == "meta" and out["x"].device.type == "cpu"
    assert ac.send_to_device(torch.ones(1), torch.device("meta")).device.type == "meta"


def test_data_structure_roundtrip() -> None:
    data = {"a": torch.ones(2, 3, dtype=torch.float16), "b": [torch.zeros(4, dtype=torch.int64)]}
    info = ac.get_data_structure(data)
    assert ac.is_tensor_information(info["a"]) and not ac.is_tensor_information(data["a"])
    assert info["a"] == ac.TensorInformation(torch.Size([2, 3]), torch.float16)
    made = ac.initialize_tensors(info)
    assert made["a"].shape == (2, 3) and made["a"].dtype == torch.float16
    assert made["b"][0].shape == (4,) and made["b"][0].dtype == torch.int64
    assert ac.get_shape(data) == {"a": [2, 3], "b": [[4]]}


def test_find_batch_size() -> None:
    assert ac.find_batch_size({"x": [torch.ones(5, 2)], "y": torch.ones(3)}) == 5
    assert ac.find_batch_size((torch.ones(7),)) == 7
    with pytest.raises(ValueError, match="empty list"):
        ac.find_batch_size([])
    with pytest.raises(TypeError, match="first leaf is a str"):
        ac.find_batch_size(["a", torch.ones(2)])
    with pytest.raises(TypeError, match="0-dimensional"):
        ac.find_batch_size(torch.tensor(1.0))
    assert ac.ignorant_find_batch_size([]) is None
    assert ac.ignorant_find_batch_size({"x": "text"}) is None
    assert ac.ignorant_find_batch_size([torch.ones(4)]) == 4


def test_find_device() -> None:
    assert ac.find_device({"a": "x", "b": [None, torch.ones(1, device="meta")]}) == torch.device(
        "meta"
    )
    assert ac.find_device(torch.ones(1)) == torch.device("cpu")
    assert ac.find_device({"a": 1}) is None


def test_listify_and_convert_to_fp32() -> None:
    data = {
        "a": torch.tensor([[1, 2]]),
        "b": (torch.tensor([0.5], dtype=torch.bfloat16),),
        "s": "x",
    }
    assert ac.listify(data) == {"a": [[1, 2]], "b": ([0.5],), "s": "x"}
    halves = [torch.ones(1, dtype=torch.float16), torch.ones(1, dtype=torch.bfloat16)]
    full = ac.convert_to_fp32(halves + [torch.ones(1, dtype=torch.int64), "s"])
    assert [t.dtype for t in full[:3]] == [torch.float32, torch.float32, torch.int64]
    assert full[3] == "s"


def test_slice_tensors() -> None:
    data = {"a": torch.arange(10), "b": [torch.arange(20).reshape(10, 2)]}
    out = ac.slice_tensors(data, slice(2, 4))
    assert out["a"].tolist() == [2, 3] and out["b"][0].tolist() == [[4, 5], [6, 7]]


def test_concatenate() -> None:
    parts = [{"a": (torch.ones(1, 2), torch.tensor([i]))} for i in range(3)]
    out = ac.concatenate(parts)
    assert out["a"][0].shape == (3, 2) and out["a"][1].tolist() == [0, 1, 2]
    assert type(out["a"]) is tuple
    assert ac.concatenate([torch.ones(2, 1), torch.zeros(2, 1)], dim=1).tolist() == [[1, 0], [1, 0]]
    with pytest.raises(ValueError, match="empty list"):
        ac.concatenate([])
    with pytest.raises(TypeError, match="found a str"):
        ac.concatenate(["a", "b"])


def test_concatenate_returns_a_single_batch_as_is() -> None:
    # One batch needs no joining: its non-tensor leaves come back unchanged, as in the reference.
    assert ac.concatenate(["text"]) == "text"
    batch = {"ids": torch.ones(2), "names": ["a", "b"], "step": 3}
    out = ac.concatenate([batch])
    assert out["names"] == ["a", "b"] and out["step"] == 3 and out["ids"].tolist() == [1, 1]
    with pytest.raises(TypeError, match="found a int"):
        ac.concatenate([{"step": 1}, {"step": 2}])
