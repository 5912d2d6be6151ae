"""Loaders built directly with ``use_stateful_dataloader=True``: they are torchdata
``StatefulDataLoader`` instances and save exactly what a ``StatefulDataLoader`` at the same
batch saves, so either one's state resumes the other (compared against torchdata itself)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest
import torch
from accel_state import GradientState
from torch.utils.data import DataLoader

from accel_data import DataLoaderDispatcher, DataLoaderShard, SkipDataLoader, prepare_data_loader

stateful_dataloader = pytest.importorskip(
    "torchdata.stateful_dataloader", reason="needs accel-data[stateful]"
)
StatefulDataLoader = stateful_dataloader.StatefulDataLoader

DATA = list(range(40))
BUILDERS: dict[str, Callable[..., Any]] = {
    "torchdata": StatefulDataLoader,
    "shard": lambda *a, **k: DataLoaderShard(*a, use_stateful_dataloader=True, **k),
    "dispatcher": lambda *a, **k: DataLoaderDispatcher(*a, use_stateful_dataloader=True, **k),
    "skip": lambda *a, **k: SkipDataLoader(*a, use_stateful_dataloader=True, **k),
}


def _build(kind: str, num_workers: int) -> Any:
    generator = torch.Generator().manual_seed(7)
    return BUILDERS[kind](
        DATA, batch_size=4, shuffle=True, num_workers=num_workers, generator=generator
    )


def _same(first: Any, second: Any) -> bool:
    """Equality of two states that may hold tensors (a shuffling sampler's generator)."""
    if isinstance(first, torch.Tensor) or isinstance(second, torch.Tensor):
        return (
            isinstance(first, torch.Tensor)
            and isinstance(second, torch.Tensor)
            and torch.equal(first, second)
        )
    if isinstance(first, dict) and isinstance(second, dict):
        return first.keys() == second.keys() and all(_same(first[k], second[k]) for k in first)
    if isinstance(first, (list, tuple)) and isinstance(second, (list, tuple)):
        return len(first) == len(second) and all(map(_same, first, second))
    return bool(first == second)


def _take(loader: Any, count: int) -> tuple[list[list[int]], dict[str, Any]]:
    """The first ``count`` batches, and the state saved while the last one is in use."""
    batches: list[list[int]] = []
    for batch in loader:
        batches.append(batch.tolist())
        if len(batches) == count:
            state = loader.state_dict()
            break
    if hasattr(loader, "end"):
        loader.end()
    return batches, state


def test_plain_loaders_are_their_own_base_dataloader() -> None:
    loaders = [
        SkipDataLoader(DATA, batch_size=4, skip_batches=1),
        DataLoaderShard(DATA, batch_size=4),
        DataLoaderDispatcher(DATA, batch_size=4),
    ]
    for loader in loaders:
        assert loader.base_dataloader is loader
        assert not isinstance(loader, StatefulDataLoader)
    for cls in (SkipDataLoader, DataLoaderShard, DataLoaderDispatcher):
        with pytest.raises(AttributeError, match="base_dataloader"):
            _ = cls.base_dataloader


@pytest.mark.parametrize("kind", ["shard", "dispatcher", "skip"])
def test_built_directly_they_are_stateful_dataloaders(kind: str) -> None:
    loader = _build(kind, 0)
    cls = {"shard": DataLoaderShard, "dispatcher": DataLoaderDispatcher, "skip": SkipDataLoader}
    assert isinstance(loader, cls[kind]) and isinstance(loader, StatefulDataLoader)
    assert loader.use_stateful_dataloader
    assert loader.base_dataloader is loader


def test_the_flag_given_by_position_builds_the_stateful_class() -> None:
    shard = DataLoaderShard(DATA, None, None, None, 0, True, batch_size=4)
    dispatcher = DataLoaderDispatcher(DATA, False, 0, True, batch_size=4)
    skip = SkipDataLoader(DATA, 1, True, batch_size=4)
    for loader in (shard, dispatcher, skip):
        assert isinstance(loader, StatefulDataLoader) and loader.use_stateful_dataloader


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("kind", ["shard", "dispatcher", "skip"])
def test_mid_epoch_state_equals_torchdata_and_resumes_like_it(kind: str, num_workers: int) -> None:
    expected_batches, expected_state = _take(_build("torchdata", num_workers), 3)
    batches, state = _take(_build(kind, num_workers), 3)
    assert batches == expected_batches
    assert _same(state, expected_state)

    reference = _build("torchdata", num_workers)
    reference.load_state_dict(state)
    rest = [batch.tolist() for batch in reference]
    assert len(rest) == 10 - 3
    resumed = _build(kind, num_workers)
    resumed.load_state_dict(expected_state)
    assert [batch.tolist() for batch in resumed] == rest
    # The next epoch is whole again.
    assert len([batch for batch in resumed]) == 10
    assert GradientState().active_dataloader is None


@pytest.mark.parametrize("kind", ["shard", "dispatcher", "skip"])
def test_state_at_the_last_batch_starts_a_new_epoch(kind: str) -> None:
    loader = _build(kind, 0)
    for _ in loader:
        if loader.end_of_dataloader:
            state = loader.state_dict()
    assert state["_iterator_finished"] is True and state["_num_yielded"] == 10
    resumed = _build(kind, 0)
    resumed.load_state_dict(state)
    assert len(list(resumed)) == 10


def test_state_before_and_after_a_pass_is_torchdata_s() -> None:
    loader, reference = _build("shard", 0), _build("torchdata", 0)
    assert _same(loader.state_dict(), reference.state_dict())
    list(loader), list(reference)
    assert _same(loader.state_dict(), reference.state_dict())


def test_skip_data_loader_skips_and_flags_the_last_batch() -> None:
    loader = SkipDataLoader(DATA, batch_size=4, skip_batches=8, use_stateful_dataloader=True)
    seen = []
    for batch in loader:
        seen.append((batch.tolist(), loader.end_of_dataloader))
    assert seen == [(list(range(32, 36)), False), (list(range(36, 40)), True)]
    assert len(list(loader)) == 10  # the skip is for one pass


def test_a_prepared_loader_resumes_from_torchdata_s_state() -> None:
    def prepared() -> Any:
        loader = DataLoader(DATA, batch_size=4, shuffle=True, generator=torch.Generator())
        loader.generator.manual_seed(3)  # type: ignore[union-attr]
        return prepare_data_loader(
            loader, num_processes=1, process_index=0, use_stateful_dataloader=True
        )

    expected = [batch.tolist() for batch in prepared()]
    source = prepared()
    seen, state = _take(source, 4)
    # A prepared loader saves its position around torchdata's state ...
    assert state["batches_yielded"] == 4 and state["dataloader_state"]["_num_yielded"] == 4
    # ... and loads torchdata's state on its own (a checkpoint of another library).
    resumed = prepared()
    resumed.load_state_dict(state["dataloader_state"])
    assert resumed.skip_batches == 4 and len(resumed) == 6
    assert seen + [batch.tolist() for batch in resumed] == expected


def test_a_malformed_torchdata_state_is_refused_with_the_rule() -> None:
    loader = _build("shard", 0)
    with pytest.raises(ValueError, match="_num_yielded"):
        loader.load_state_dict({"_iterator_finished": False, "_num_yielded": -1})


@pytest.mark.parametrize("cls", [DataLoaderShard, DataLoaderDispatcher, SkipDataLoader])
def test_missing_torchdata_names_the_extra(cls: type, monkeypatch: pytest.MonkeyPatch) -> None:
    from accel_data.loaders import _stateful

    _stateful.stateful_class.cache_clear()
    # A None entry in sys.modules makes the import fail as if torchdata were not installed.
    monkeypatch.setitem(sys.modules, "torchdata.stateful_dataloader", None)
    try:
        with pytest.raises(ImportError, match=r'pip install "accel-data\[stateful\]"'):
            cls(DATA, batch_size=4, use_stateful_dataloader=True)
        assert not isinstance(cls(DATA, batch_size=4), StatefulDataLoader)
    finally:
        _stateful.stateful_class.cache_clear()
