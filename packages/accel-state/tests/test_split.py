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
