"""Pin the public names of accel_collectives."""

from __future__ import annotations

import inspect

import accel_collectives

EXPECTED = {
    "DistributedOperationException",
    "TensorInformation",
    "__version__",
    "average_parameters",
    "broadcast",
    "broadcast_object_list",
    "concatenate",
    "convert_to_fp32",
    "copy_tensor_to_devices",
    "find_batch_size",
    "find_device",
    "gather",
    "gather_object",
    "get_data_structure",
    "get_shape",
    "honor_type",
    "ignorant_find_batch_size",
    "initialize_tensors",
    "is_namedtuple",
    "is_tensor_information",
    "is_torch_tensor",
    "listify",
    "pad_across_processes",
    "pad_input_tensors",
    "CannotPadNestedTensorWarning",
    "recursively_apply",
    "reduce",
    "send_to_device",
    "slice_tensors",
    "TENSOR_INT_TO_DTYPE",
    "TENSOR_TYPE_TO_INT",
    "chained_operation",
    "gather_tensor_shape",
    "is_torch_xpu_tensor",
    "verify_operation",
}


def test_all_is_pinned() -> None:
    assert set(accel_collectives.__all__) == EXPECTED
    assert len(accel_collectives.__all__) == len(EXPECTED)


def test_every_name_exists() -> None:
    for name in accel_collectives.__all__:
        assert hasattr(accel_collectives, name), name


def _defaults(func: object) -> dict[str, object]:
    return {
        name: p.default
        for name, p in inspect.signature(func).parameters.items()  # type: ignore[arg-type]
        if p.default is not inspect.Parameter.empty
    }


def test_documented_signatures() -> None:
    ac = accel_collectives
    assert list(inspect.signature(ac.gather).parameters) == ["tensor"]
    assert list(inspect.signature(ac.gather_object).parameters) == ["object"]
    assert _defaults(ac.broadcast) == {"from_process": 0}
    assert _defaults(ac.broadcast_object_list) == {"from_process": 0}
    assert _defaults(ac.reduce) == {"reduction": "mean", "scale": 1.0}
    assert _defaults(ac.pad_across_processes) == {"dim": 0, "pad_index": 0, "pad_first": False}
    assert _defaults(ac.concatenate) == {"dim": 0}
    assert _defaults(ac.send_to_device) == {"non_blocking": False, "skip_keys": None}
    assert _defaults(ac.slice_tensors) == {"process_index": None, "num_processes": None}
    assert _defaults(ac.recursively_apply) == {
        "test_type": ac.is_torch_tensor,
        "error_on_other_type": False,
    }


def test_exception_is_a_runtime_error() -> None:
    assert issubclass(accel_collectives.DistributedOperationException, RuntimeError)
