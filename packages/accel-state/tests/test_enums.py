import pytest

from accel_state import (
    ComputeEnvironment,
    DistributedType,
    DynamoBackend,
    PrecisionType,
    RNGType,
    SageMakerDistributedType,
)


def test_values_match_the_documented_ones():
    assert PrecisionType.list() == ["no", "fp8", "fp16", "bf16"]
    assert DistributedType.MULTI_CPU == "MULTI_CPU"
    assert {"NO", "MULTI_CPU", "MULTI_GPU", "MULTI_NPU", "MULTI_XPU", "DEEPSPEED", "TPU"} <= set(
        DistributedType.list()
    )
    assert ComputeEnvironment.list() == ["LOCAL_MACHINE", "AMAZON_SAGEMAKER"]
    assert SageMakerDistributedType.list() == ["NO", "DATA_PARALLEL", "MODEL_PARALLEL"]
    assert DynamoBackend.INDUCTOR == "INDUCTOR" and RNGType.GENERATOR == "generator"


def test_parse_accepts_names_and_values_case_insensitively():
    assert PrecisionType.parse("BF16", "mixed_precision") is PrecisionType.BF16
    assert DynamoBackend.parse("inductor", "backend") is DynamoBackend.INDUCTOR


def test_parse_error_lists_choices():
    with pytest.raises(ValueError, match=r"mixed_precision must be one of .*got 'fp12'"):
        PrecisionType.parse("fp12", "mixed_precision")
