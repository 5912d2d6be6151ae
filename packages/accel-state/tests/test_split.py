from __future__ import annotations

import pytest
import torch

from accel_state._process._split import split_bounds, split_inputs

PROMPTS = ["a dog", "a cat", "a chicken"]


def test_seed_example_three_prompts_two_processes():
    assert split_inputs(PROMPTS, 2, 0, False) == ["a dog", "a cat"]
    assert split_inputs(PROMPTS, 2, 1, False) == ["a chicken"]


def test_seed_example_with_padding():
    assert split_inputs(PROMPTS, 2, 0, True) == ["a dog", "a cat"]
    assert split_inputs(PROMPTS, 2, 1, True) == ["a chicken", "a chicken"]


@pytest.mark.parametrize("length", range(0, 12))
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_shares_cover_input_exactly_once(length, world):
    items = list(range(length))
    shares = [split_inputs(items, world, r, False) for r in range(world)]
    assert sum(shares, []) == items
    padded = [split_inputs(items, world, r, True) for r in range(world)]
    if length:
        assert len({len(s) for s in padded}) == 1


def test_bounds_first_processes_get_extras():
    assert [split_bounds(7, 3, r)[:2] for r in range(3)] == [(0, 3), (3, 5), (5, 7)]


def test_tensor_and_tuple_and_dict():
    t = torch.arange(10).reshape(5, 2)
    a, b = (split_inputs(t, 2, r, True) for r in range(2))
    assert a.tolist() == [[0, 1], [2, 3], [4, 5]]
    assert b.tolist() == [[6, 7], [8, 9], [8, 9]]
    assert split_inputs((1, 2, 3), 2, 1, False) == (3,)
    d = split_inputs({"x": [1, 2, 3], "y": torch.tensor([4, 5, 6])}, 2, 1, True)
    assert d["x"] == [3, 3] and d["y"].tolist() == [6, 6]


def test_more_processes_than_items():
    assert split_inputs(["only"], 2, 1, False) == []
    assert split_inputs(["only"], 2, 1, True) == ["only"]


def test_dict_with_unequal_lengths_is_refused():
    with pytest.raises(ValueError, match="same length"):
        split_inputs({"a": [1, 2], "b": [1]}, 2, 0, False)


def test_unsupported_type_is_refused():
    with pytest.raises(TypeError, match="list, tuple, dict"):
        split_inputs(42, 2, 0, False)


@pytest.mark.parametrize(
    ("length", "apply_padding"), [(4, False), (3, False), (3, True), (4, True)]
)
def test_datasets_dataset_is_split_with_select(length, apply_padding):
    datasets = pytest.importorskip("datasets")
    data = datasets.Dataset.from_list([{"k": v} for v in range(length)])
    shares = [split_inputs(data, 2, rank, apply_padding) for rank in range(2)]
    assert all(isinstance(share, datasets.Dataset) for share in shares)
    values = [list(share["k"]) for share in shares]
    if apply_padding:
        assert [len(v) for v in values] == [2, 2]
        assert values[1][-1] == length - 1
    assert sum(values, [])[:length] == list(range(length))


class _Rows:
    """A sized table with ``select(indices)``, the protocol a ``datasets.Dataset`` follows."""

    def __init__(self, rows: list[int]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def select(self, indices: list[int]) -> _Rows:
        return _Rows([self.rows[i] for i in indices])


def test_selectable_table_is_split_and_padded_with_its_last_row():
    assert split_inputs(_Rows([0, 1, 2]), 2, 0, False).rows == [0, 1]
    assert split_inputs(_Rows([0, 1, 2]), 2, 1, False).rows == [2]
    assert split_inputs(_Rows([0, 1, 2]), 2, 1, True).rows == [2, 2]
    assert split_inputs(_Rows([0]), 2, 1, True).rows == [0]
