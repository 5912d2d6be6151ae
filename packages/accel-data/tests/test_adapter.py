"""``DataLoaderAdapter``: stands in for the loader it builds, and with torchdata's
``StatefulDataLoader`` resumes exactly after the batches it yielded."""

import pytest
import torch
from torch.utils.data import DataLoader

from accel_data import DataLoaderAdapter

DATA = list(range(12))


def test_a_plain_adapter_forwards_to_its_dataloader_and_refuses_state():
    adapter = DataLoaderAdapter(DATA, batch_size=4, shuffle=False)
    assert isinstance(adapter, DataLoader) and isinstance(adapter, DataLoaderAdapter)
    assert len(adapter) == 3 and adapter.batch_size == 4 and adapter.dataset is DATA
    assert [b.tolist() for b in adapter] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    with pytest.raises(TypeError, match="use_stateful_dataloader=True"):
        adapter.state_dict()
    with pytest.raises(TypeError, match="use_stateful_dataloader=True"):
        adapter.load_state_dict({})
    with pytest.raises(AttributeError):
        adapter.not_an_attribute  # noqa: B018


def test_a_stateful_adapter_resumes_after_the_batches_it_yielded():
    pytest.importorskip("torchdata", reason='needs torchdata: pip install "accel-data[stateful]"')
    from torchdata.stateful_dataloader import StatefulDataLoader

    def adapter():
        generator = torch.Generator().manual_seed(0)
        return DataLoaderAdapter(
            DATA, use_stateful_dataloader=True, batch_size=2, shuffle=True, generator=generator
        )

    whole = [b.tolist() for b in adapter()]
    first = adapter()
    assert isinstance(first, StatefulDataLoader) and first.use_stateful_dataloader
    seen = []
    for batch in first:
        seen.append(batch.tolist())
        if len(seen) == 2:
            state = first.state_dict()
            break
    resumed = adapter()
    resumed.load_state_dict(state)
    assert resumed.state_dict() is state
    assert seen + [b.tolist() for b in resumed] == whole
