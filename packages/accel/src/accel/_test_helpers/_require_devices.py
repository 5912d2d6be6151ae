"""``require_*`` decorators on the machine's devices and numeric formats: each skips a test,
with a reason naming what this machine lacks, when the test needs hardware absent here."""

from __future__ import annotations

import torch
from accel_state import (
    check_cuda_fp8_capability,
    compare_versions,
    is_cuda_available,
    is_fp8_available,
    is_fp16_available,
    is_habana_gaudi1,
    is_hpu_available,
    is_mlu_available,
    is_mps_available,
    is_musa_available,
    is_neuron_available,
    is_npu_available,
    is_pippy_available,
    is_sdaa_available,
    is_torch_version,
    is_torch_xla_available,
    is_transformers_available,
    is_xpu_available,
)

from ._markers import requirement
from ._test_device import device_count, torch_device

_HERE = f"this machine's tests run on {torch_device} ({device_count} device(s))"


def _count(family: str) -> int:
    """Devices of ``torch.<family>`` on this machine (0 when torch has no such family)."""
    module = getattr(torch, family, None)
    available = getattr(module, "is_available", None)
    if module is None or available is None or not available():
        return 0
    return int(module.device_count())


def _cuda() -> bool:
    return is_cuda_available() and not is_torch_xla_available()


def _fp8() -> bool:
    if not is_fp8_available():
        return False
    if torch.cuda.is_available() and not check_cuda_fp8_capability():
        return False
    return not (is_hpu_available() and is_habana_gaudi1())


def _tensor_parallel() -> bool:
    return (
        is_torch_version(">=", "2.3.0")
        and is_transformers_available()
        and compare_versions("transformers", ">=", "4.52.0")
    )


require_cpu = requirement("require_cpu", lambda: torch_device == "cpu", "only a CPU", _HERE)
require_non_cpu = requirement(
    "require_non_cpu", lambda: torch_device != "cpu", "a hardware accelerator", _HERE
)
require_cuda = requirement("require_cuda", _cuda, "a CUDA GPU (without torch_xla)", _HERE)
require_cuda_or_hpu = requirement(
    "require_cuda_or_hpu", lambda: _cuda() or is_hpu_available(), "a CUDA GPU or an HPU", _HERE
)
require_cuda_or_xpu = requirement(
    "require_cuda_or_xpu", lambda: _cuda() or is_xpu_available(), "a CUDA GPU or an XPU", _HERE
)
require_xpu = requirement("require_xpu", is_xpu_available, "an Intel XPU", _HERE)
require_mlu = requirement("require_mlu", is_mlu_available, "a Cambricon MLU", _HERE)
require_sdaa = requirement("require_sdaa", is_sdaa_available, "an SDAA device", _HERE)
require_musa = requirement("require_musa", is_musa_available, "a Moore Threads MUSA", _HERE)
require_npu = requirement("require_npu", is_npu_available, "an Ascend NPU", _HERE)
require_neuron = requirement("require_neuron", is_neuron_available, "AWS Neuron cores", _HERE)
require_mps = requirement("require_mps", is_mps_available, "Apple's mps backend in torch", _HERE)
require_tpu = requirement(
    "require_tpu", lambda: is_torch_xla_available(check_is_tpu=True), "a TPU", _HERE
)
require_non_xpu = requirement(
    "require_non_xpu", lambda: torch_device != "xpu", "a device other than an XPU", _HERE
)
require_non_hpu = requirement(
    "require_non_hpu", lambda: torch_device != "hpu", "a device other than an HPU", _HERE
)
require_non_torch_xla = requirement(
    "require_non_torch_xla",
    lambda: not is_torch_xla_available(),
    "an environment without torch_xla",
    "torch_xla is installed and enabled (set USE_TORCH_XLA=0 to turn it off)",
)
require_single_device = requirement(
    "require_single_device",
    lambda: torch_device != "cpu" and device_count == 1,
    "exactly one hardware accelerator",
    _HERE,
)
require_single_gpu = requirement(
    "require_single_gpu", lambda: _count("cuda") == 1, "exactly one CUDA GPU", _HERE
)
require_single_xpu = requirement(
    "require_single_xpu", lambda: _count("xpu") == 1, "exactly one XPU", _HERE
)
require_multi_device = requirement(
    "require_multi_device", lambda: device_count > 1, "several hardware accelerators", _HERE
)
require_multi_gpu = requirement(
    "require_multi_gpu", lambda: _count("cuda") > 1, "several CUDA GPUs", _HERE
)
require_multi_xpu = requirement(
    "require_multi_xpu", lambda: _count("xpu") > 1, "several XPUs", _HERE
)
require_multi_gpu_or_xpu = requirement(
    "require_multi_gpu_or_xpu",
    lambda: (is_cuda_available() or is_xpu_available()) and device_count > 1,
    "several CUDA GPUs or XPUs",
    _HERE,
)
require_fp16 = requirement(
    "require_fp16", is_fp16_available, "FP16 support", f"none on {torch_device} here"
)
require_fp8 = requirement(
    "require_fp8",
    _fp8,
    "FP8 support",
    "needs an FP8 library (transformer-engine, torchao or MS-AMP) and a device of compute "
    f"capability 8.9 or newer (not Gaudi 1); {_HERE}",
)
require_fsdp2 = requirement(
    "require_fsdp2",
    lambda: is_torch_version(">=", "2.5.0"),
    "FSDP2 (torch >= 2.5.0)",
    f"torch {torch.__version__} is installed",
)
require_tp = requirement(
    "require_tp",
    _tensor_parallel,
    "torch version >= 2.3.0 and transformers version >= 4.52.0",
    "install them: pip install 'torch>=2.3' 'transformers>=4.52'",
)
require_pippy = requirement(
    "require_pippy",
    lambda: is_pippy_available() and not is_habana_gaudi1(),
    "pippy (torch.distributed.pipelining or torchpippy; not on Gaudi 1)",
    f"not available with torch {torch.__version__} on {torch_device}",
)

__all__ = [
    "require_cpu",
    "require_cuda",
    "require_cuda_or_hpu",
    "require_cuda_or_xpu",
    "require_fp8",
    "require_fp16",
    "require_fsdp2",
    "require_mlu",
    "require_mps",
    "require_multi_device",
    "require_multi_gpu",
    "require_multi_gpu_or_xpu",
    "require_multi_xpu",
    "require_musa",
    "require_neuron",
    "require_non_cpu",
    "require_non_hpu",
    "require_non_torch_xla",
    "require_non_xpu",
    "require_npu",
    "require_pippy",
    "require_sdaa",
    "require_single_device",
    "require_single_gpu",
    "require_single_xpu",
    "require_tp",
    "require_tpu",
    "require_xpu",
]
