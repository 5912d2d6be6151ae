"""The public names of accel-data."""

from __future__ import annotations

import inspect

import accel_data


def test_all_is_pinned() -> None:
    assert sorted(accel_data.__all__) == [
        "BatchSamplerShard",
        "DataLoaderAdapter",
        "DataLoaderConfiguration",
        "DataLoaderDispatcher",
        "DataLoaderShard",
        "DataLoaderStateMixin",
        "IterableDatasetShard",
        "MpDeviceLoaderWrapper",
        "SeedableRandomSampler",
        "SkipBatchSampler",
        "SkipDataLoader",
        "__version__",
        "gather_for_metrics",
        "get_sampler",
        "override_even_batches",
        "prepare_data_loader",
        "skip_first_batches",
    ]
    for name in accel_data.__all__:
        assert hasattr(accel_data, name), name


def test_documented_signatures() -> None:
    assert list(inspect.signature(accel_data.prepare_data_loader).parameters) == [
        "dataloader",
        "device",
        "num_processes",
        "process_index",
        "split_batches",
        "put_on_device",
        "rng_types",
        "dispatch_batches",
        "even_batches",
        "slice_fn_for_dispatch",
        "use_seedable_sampler",
        "data_seed",
        "non_blocking",
        "use_stateful_dataloader",
        "torch_device_mesh",
    ]
    gather = inspect.signature(accel_data.gather_for_metrics).parameters
    assert list(gather) == ["input_data", "use_gather_object"]
    assert gather["use_gather_object"].default is False
    skip = inspect.signature(accel_data.skip_first_batches).parameters
    assert list(skip) == ["dataloader", "num_batches"] and skip["num_batches"].default == 0


def test_public_names_are_documented() -> None:
    for name in accel_data.__all__:
        if name != "__version__":
            assert inspect.getdoc(getattr(accel_data, name)), name
