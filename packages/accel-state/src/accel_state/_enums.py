"""Enumerations shared by every accel package."""

from __future__ import annotations

import enum


class _StrEnum(str, enum.Enum):
    """A string enum whose members compare equal to their values."""

    def __str__(self) -> str:
        return str(self.value)

    @classmethod
    def list(cls) -> list[str]:
        """Return every value of the enum, in declaration order."""
        return [m.value for m in cls]

    @classmethod
    def parse(cls, value: object, what: str):
        """Turn ``value`` into a member, or raise a ``ValueError`` naming the valid choices.

        Args:
            value: A member, its value or its name (case-insensitive).
            what: How the caller calls this setting, used in the error message.
        """
        if isinstance(value, cls):
            return value
        text = str(value)
        for member in cls:
            if text.lower() in (member.value.lower(), member.name.lower()):
                return member
        raise ValueError(
            f"{what} must be one of {cls.list()}; got {value!r}. Pass one of {cls.list()}."
        )


class ComputeEnvironment(_StrEnum):
    """Where the processes run."""

    LOCAL_MACHINE = "LOCAL_MACHINE"
    AMAZON_SAGEMAKER = "AMAZON_SAGEMAKER"


class DistributedType(_StrEnum):
    """The kind of distributed environment a process runs in."""

    NO = "NO"
    MULTI_CPU = "MULTI_CPU"
    MULTI_GPU = "MULTI_GPU"
    MULTI_NPU = "MULTI_NPU"
    MULTI_XPU = "MULTI_XPU"
    MULTI_MLU = "MULTI_MLU"
    MULTI_SDAA = "MULTI_SDAA"
    MULTI_MUSA = "MULTI_MUSA"
    MULTI_HPU = "MULTI_HPU"
    MULTI_NEURON = "MULTI_NEURON"
    DEEPSPEED = "DEEPSPEED"
    FSDP = "FSDP"
    MEGATRON_LM = "MEGATRON_LM"
    TPU = "TPU"
    XLA = "XLA"


class SageMakerDistributedType(_StrEnum):
    """The kind of distributed environment on Amazon SageMaker."""

    NO = "NO"
    DATA_PARALLEL = "DATA_PARALLEL"
    MODEL_PARALLEL = "MODEL_PARALLEL"


class DDPCommunicationHookType(_StrEnum):
    """A communication hook registered on a ``DistributedDataParallel`` model.

    ``FP16`` / ``BF16`` compress gradients to half precision before the all-reduce;
    ``POWER_SGD`` / ``BATCHED_POWER_SGD`` send a low-rank approximation (torch's PowerSGD).
    As ``comm_wrapper``, ``FP16`` / ``BF16`` compress what another hook sends.
    """

    NO = "no"
    FP16 = "fp16"
    BF16 = "bf16"
    POWER_SGD = "power_sgd"
    BATCHED_POWER_SGD = "batched_power_sgd"


class DynamoBackend(_StrEnum):
    """A ``torch.compile`` backend."""

    NO = "NO"
    EAGER = "EAGER"
    AOT_EAGER = "AOT_EAGER"
    INDUCTOR = "INDUCTOR"
    AOT_TS_NVFUSER = "AOT_TS_NVFUSER"
    NVPRIMS_NVFUSER = "NVPRIMS_NVFUSER"
    CUDAGRAPHS = "CUDAGRAPHS"
    OFI = "OFI"
    FX2TRT = "FX2TRT"
    ONNXRT = "ONNXRT"
    TENSORRT = "TENSORRT"
    IPEX = "IPEX"
    AOT_TORCHXLA_TRACE_ONCE = "AOT_TORCHXLA_TRACE_ONCE"
    TORCHXLA_TRACE_ONCE = "TORCHXLA_TRACE_ONCE"
    TVM = "TVM"
    HPU_BACKEND = "HPU_BACKEND"
    NEURON = "NEURON"


class PrecisionType(_StrEnum):
    """The floating-point precision of a run."""

    NO = "no"
    FP8 = "fp8"
    FP16 = "fp16"
    BF16 = "bf16"


class RNGType(_StrEnum):
    """A random number generator that accel can synchronise across processes."""

    TORCH = "torch"
    CUDA = "cuda"
    MLU = "mlu"
    SDAA = "sdaa"
    MUSA = "musa"
    NPU = "npu"
    XLA = "xla"
    XPU = "xpu"
    HPU = "hpu"
    NEURON = "neuron"
    GENERATOR = "generator"
