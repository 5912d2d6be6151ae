"""Prepared loaders built on torchdata's StatefulDataLoader: mid-epoch resume with worker state."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

from accel_data import (
    DataLoaderDispatcher,
    DataLoaderShard,
    prepare_data_loader,
    skip_first_batches,
)

pytest.importorskip("torchdata.stateful_dataloader", reason="needs accel-data[stateful]")


class AugmentingDataset(Dataset):
    """Sample ``i`` plus noise drawn from a generator each worker seeds and keeps."""

    def __init__(self, size: int = 23) -> None:
        self.size = size
        self._generator: torch.Generator | None = None

    def __len__(self) -> int:
        return self.size

    def _rng(self) -> torch.Generator:
        if self._generator is None:
            info = get_worker_info()
            seed = info.seed if info is not None else 1234
            self._generator = torch.Generator().manual_seed(seed)
        return self._generator

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.tensor([float(index)]) + torch.rand(1, generator=self._rng())

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"rng": self._rng().get_state()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self._rng().set_state(state["rng"])


def _prepared(num_workers: int, dispatch: bool, stateful: bool = True, seed: int = 0):
    torch.manual_seed(seed)
    loader = DataLoader(AugmentingDataset(), batch_size=3, shuffle=True, num_workers=num_workers)
    return prepare_data_loader(
        loader,
        num_processes=1,
        process_index=0,
        dispatch_batches=dispatch,
        use_stateful_dataloader=stateful,
    )


def _roundtrip(state: dict, tmp_path: Path) -> dict:
    path = tmp_path / "loader.pt"
    torch.save(state, path)
    return torch.load(path, weights_only=True)


def _equal(first: list[torch.Tensor], second: list[torch.Tensor]) -> bool:
    return len(first) == len(second) and all(torch.equal(a, b) for a, b in zip(first, second))


@pytest.mark.parametrize("dispatch", [False, True], ids=["sharded", "dispatched"])
@pytest.mark.parametrize("num_workers", [0, 2])
def test_resume_mid_epoch_continues_with_the_workers_state(
    num_workers: int, dispatch: bool, tmp_path: Path
) -> None:
    loader = _prepared(num_workers, dispatch)
    expected = [batch.clone() for _ in range(2) for batch in loader]  # two epochs

    loader = _prepared(num_workers, dispatch)
    seen = []
    for i, batch in enumerate(loader):
        seen.append(batch.clone())
        if i == 4:
            state = _roundtrip(loader.state_dict(), tmp_path)
            rng = torch.get_rng_state()  # save_state keeps it too: later epochs' worker seeds
            break
    assert state["batches_yielded"] == 5 and state["dataloader_state"] is not None

    # A new loader, with another global seed, continues the epoch, then runs the next one.
    resumed = _prepared(num_workers, dispatch, seed=99)
    resumed.load_state_dict(state)
    torch.set_rng_state(rng)
    assert resumed.state_dict()["batches_yielded"] == 5
    assert len(resumed) == 8 - 5  # the rest of the epoch, as for a plain loader
    seen += [batch.clone() for batch in resumed]
    assert resumed.state_dict()["epoch"] == 1 and resumed.state_dict()["dataloader_state"] is None
    seen += [batch.clone() for batch in resumed]
    assert _equal(seen, expected)


def test_position_only_resume_loses_the_workers_state(tmp_path: Path) -> None:
    # What the stateful loader is for: the same resume by position gives other samples.
    loader = _prepared(2, dispatch=False, stateful=False)
    expected = [batch.clone() for batch in loader]
    loader = _prepared(2, dispatch=False, stateful=False)
    seen = [batch.clone() for _, batch in zip(range(5), loader)]
    state = _roundtrip(loader.state_dict(), tmp_path)
    assert "dataloader_state" not in state
    resumed = _prepared(2, dispatch=False, stateful=False, seed=99)
    resumed.load_state_dict(state)
    seen += [batch.clone() for batch in resumed]
    assert len(seen) == len(expected)
    assert [b.floor().tolist() for b in seen] == [
        b.floor().tolist() for b in expected
    ]  # same order
    assert not _equal(seen, expected)  # other noise


def test_stateful_loaders_are_the_prepared_classes() -> None:
    assert isinstance(_prepared(0, dispatch=False), DataLoaderShard)
    assert isinstance(_prepared(0, dispatch=True), DataLoaderDispatcher)
    from torchdata.stateful_dataloader import StatefulDataLoader

    assert isinstance(_prepared(0, dispatch=False), StatefulDataLoader)
    assert not isinstance(_prepared(0, dispatch=False, stateful=False), StatefulDataLoader)


def test_skip_first_batches_then_resume(tmp_path: Path) -> None:
    loader = _prepared(2, dispatch=False)
    expected = [batch.clone() for batch in loader]
    loader = _prepared(2, dispatch=False)
    skipped = skip_first_batches(loader, 2)
    seen = [batch.clone() for _, batch in zip(range(2), skipped)]
    # The original loader (the one save_state saves) shares the position and worker state.
    state = _roundtrip(loader.state_dict(), tmp_path)
    assert state["batches_yielded"] == 4 and state["dataloader_state"] is not None
    resumed = _prepared(2, dispatch=False, seed=99)
    resumed.load_state_dict(state)
    seen += [batch.clone() for batch in resumed]
    assert _equal(seen, expected[2:])


def test_state_between_epochs_starts_the_next_epoch(tmp_path: Path) -> None:
    loader = _prepared(0, dispatch=False)
    expected = [[b.clone() for b in loader] for _ in range(2)]
    loader = _prepared(0, dispatch=False)
    first = [b.clone() for b in loader]
    state = _roundtrip(loader.state_dict(), tmp_path)
    assert state["epoch"] == 1 and state["dataloader_state"] is None
    resumed = _prepared(0, dispatch=False, seed=99)
    resumed.load_state_dict(state)
    assert _equal(first, expected[0])
    # Position-only across the epoch boundary: same order, the main-process dataset copy.
    assert [b.floor().tolist() for b in resumed] == [b.floor().tolist() for b in expected[1]]


def test_plain_loader_refuses_a_state_with_worker_state() -> None:
    loader = _prepared(0, dispatch=False)
    next(iter(loader))
    state = loader.state_dict()
    plain = _prepared(0, dispatch=False, stateful=False)
    with pytest.raises(ValueError, match="use_stateful_dataloader=True"):
        plain.load_state_dict(state)


def test_missing_torchdata_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from accel_data.loaders import _stateful

    _stateful.stateful_class.cache_clear()
    # A None entry in sys.modules makes the import fail as if torchdata were not installed.
    monkeypatch.setitem(sys.modules, "torchdata.stateful_dataloader", None)
    try:
        with pytest.raises(ImportError, match=r'pip install "accel-data\[stateful\]"'):
            _prepared(0, dispatch=False)
    finally:
        _stateful.stateful_class.cache_clear()
