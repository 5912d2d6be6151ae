"""Pin the public names of accel-pipeline and the seed signature of prepare_pippy."""

from __future__ import annotations

import inspect

import accel_pipeline


def test_public_names() -> None:
    assert sorted(accel_pipeline.__all__) == sorted(
        [
            "BACKEND",
            "PipelineTraceError",
            "__version__",
            "build_pipeline",
            "find_pippy_batch_size",
            "find_split_points",
            "generate_device_map",
            "pippy_forward",
            "prepare_pippy",
        ]
    )
    for name in accel_pipeline.__all__:
        assert hasattr(accel_pipeline, name), name


def test_prepare_pippy_signature_matches_the_reference() -> None:
    params = inspect.signature(accel_pipeline.prepare_pippy).parameters
    assert list(params) == [
        "model",
        "split_points",
        "no_split_module_classes",
        "example_args",
        "example_kwargs",
        "num_chunks",
        "gather_output",
        "checkpoint",
    ]
    # The one addition is keyword-only with a default, so every reference call still works.
    assert params["checkpoint"].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["checkpoint"].default is None
    defaults = {n: p.default for n, p in params.items() if n not in ("model", "checkpoint")}
    assert defaults == {
        "split_points": "auto",
        "no_split_module_classes": None,
        "example_args": (),
        "example_kwargs": None,
        "num_chunks": None,
        "gather_output": False,
    }


def test_backend_is_torch_pipelining() -> None:
    assert accel_pipeline.BACKEND == "torch.distributed.pipelining"
