"""``DataLoaderConfiguration``: defaults, documentation of every field, validation."""

from __future__ import annotations

import ast
import dataclasses
import inspect

import pytest

from accel_data import DataLoaderConfiguration, _loader_config, prepare_data_loader


def test_defaults() -> None:
    config = DataLoaderConfiguration()
    assert dataclasses.asdict(config) == {
        "split_batches": False,
        "dispatch_batches": None,
        "even_batches": True,
        "use_seedable_sampler": False,
        "data_seed": None,
        "non_blocking": False,
        "use_stateful_dataloader": False,
    }


def test_every_field_has_a_docstring_under_it() -> None:
    tree = ast.parse(inspect.getsource(_loader_config))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    documented = set()
    for node, following in zip(cls.body, cls.body[1:]):
        if isinstance(node, ast.AnnAssign) and isinstance(following, ast.Expr):
            if isinstance(following.value, ast.Constant) and isinstance(following.value.value, str):
                documented.add(node.target.id)  # type: ignore[union-attr]
    assert documented == {f.name for f in dataclasses.fields(DataLoaderConfiguration)}


def test_every_field_is_an_argument_of_prepare_data_loader() -> None:
    params = inspect.signature(prepare_data_loader).parameters
    for field in dataclasses.fields(DataLoaderConfiguration):
        assert params[field.name].default == field.default, field.name


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"even_batches": "yes"}, "even_batches must be a bool; got 'yes'"),
        ({"dispatch_batches": 1}, "dispatch_batches must be None or a bool; got 1"),
        ({"data_seed": 1.5}, "data_seed must be None or an int; got 1.5"),
    ],
)
def test_wrong_types_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        DataLoaderConfiguration(**kwargs)
