"""More availability probes: optional libraries, accelerator vendors and torch features.

Each library probe looks the package up (``importlib.util.find_spec``) and reads its installed
version (``importlib.metadata``) without importing it. A device probe with
``check_device=True`` imports the vendor's torch extension to ask whether a device is present:
that is the only way to know.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from ._availability import (
    _is_at_least,
    _is_package_available,
    _vendor_device_available,
    is_torch_version,
)


# ---------------------------------------------------------------------------- libraries
def is_4bit_bnb_available() -> bool:
    """Whether bitsandbytes is installed at a version with 4-bit layers (``>= 0.39.0``)."""
    return _is_at_least("bitsandbytes", "0.39.0")


def is_8bit_bnb_available() -> bool:
    """Whether bitsandbytes is installed at a version with 8-bit layers (``>= 0.37.2``)."""
    return _is_at_least("bitsandbytes", "0.37.2")


def is_bitsandbytes_multi_backend_available() -> bool:
    """Whether the installed bitsandbytes declares its multi-backend feature (imports it)."""
    if not _is_package_available("bitsandbytes"):
        return False
    bnb = importlib.import_module("bitsandbytes")
    return "multi_backend" in getattr(bnb, "features", set())


def is_numpy_available(min_version: str = "1.25.0") -> bool:
    """Whether numpy is installed at version ``>= min_version``."""
    return _is_at_least("numpy", min_version)


def is_torchdata_available() -> bool:
    """Whether torchdata is installed."""
    return _is_package_available("torchdata")


def is_torchdata_stateful_dataloader_available() -> bool:
    """Whether torchdata's ``StatefulDataLoader`` exists (torchdata ``>= 0.8.0``)."""
    return _is_at_least("torchdata", "0.8.0")


def is_torchvision_available() -> bool:
    """Whether torchvision is installed."""
    return _is_package_available("torchvision")


def is_peft_available() -> bool:
    """Whether PEFT is installed."""
    return _is_package_available("peft")


def is_timm_available() -> bool:
    """Whether timm is installed."""
    return _is_package_available("timm")


def is_triton_available() -> bool:
    """Whether Triton is installed."""
    return _is_package_available("triton")


def is_tqdm_available() -> bool:
    """Whether tqdm is installed."""
    return _is_package_available("tqdm")


def is_pandas_available() -> bool:
    """Whether pandas is installed."""
    return _is_package_available("pandas")


def is_matplotlib_available() -> bool:
    """Whether matplotlib is installed."""
    return _is_package_available("matplotlib")


def is_boto3_available() -> bool:
    """Whether boto3 is installed."""
    return _is_package_available("boto3")


def is_sagemaker_available() -> bool:
    """Whether the SageMaker SDK is installed."""
    return _is_package_available("sagemaker")


def is_pytest_available() -> bool:
    """Whether pytest is installed."""
    return _is_package_available("pytest")


def is_schedulefree_available() -> bool:
    """Whether schedulefree optimizers are installed."""
    return _is_package_available("schedulefree")


def is_lomo_available() -> bool:
    """Whether the LOMO optimizers (``lomo-optim``) are installed."""
    return _is_package_available("lomo_optim", "lomo-optim")


def is_import_timer_available() -> bool:
    """Whether ``import_timer`` is installed."""
    return _is_package_available("import_timer", "import-timer")


def is_pynvml_available() -> bool:
    """Whether NVIDIA's management library bindings are installed."""
    return _is_package_available("pynvml") or _is_package_available("pynvml", "nvidia-ml-py")


def is_amdsmi_available() -> bool:
    """Whether AMD's SMI bindings are installed."""
    return _is_package_available("amdsmi")


def is_swanlab_available() -> bool:
    """Whether SwanLab is installed."""
    return _is_package_available("swanlab")


def is_trackio_available() -> bool:
    """Whether trackio is installed (it needs Python 3.10 or newer)."""
    return sys.version_info >= (3, 10) and _is_package_available("trackio")


def is_transformer_engine_mxfp8_available() -> bool:
    """Whether Transformer Engine is installed and reports MXFP8 support (imports it)."""
    if not _is_package_available("transformer_engine", "transformer-engine"):
        return False
    fp8 = importlib.import_module("transformer_engine.pytorch.fp8")
    check = getattr(fp8, "check_mxfp8_support", None)
    return bool(check is not None and check()[0])


def is_weights_only_available() -> bool:
    """Whether ``torch.load(weights_only=True)`` accepts allow-listed globals (torch >= 2.4)."""
    return is_torch_version(">=", "2.4.0")


# ------------------------------------------------------------------------ torch features
def is_torch_distributed_available() -> bool:
    """Whether this torch build has ``torch.distributed``."""
    return bool(torch.distributed.is_available())


def is_xccl_available() -> bool:
    """Whether this torch build has Intel's XCCL backend (torch >= 2.7)."""
    if not is_torch_version(">=", "2.7.0") or not torch.distributed.is_available():
        return False
    c10d = torch.distributed.distributed_c10d
    return bool(getattr(c10d, "is_xccl_available", lambda: False)())


def is_rocm_available() -> bool:
    """Whether torch is a ROCm build with a usable AMD GPU."""
    return torch.version.hip is not None and torch.cuda.is_available()


def check_cuda_fp8_capability() -> bool:
    """Whether the current CUDA device computes in FP8 (compute capability 8.9 or newer).

    ROCm builds report their own capability numbers and are treated as FP8-capable, as are
    machines where torch reports them so; a machine without CUDA returns False.
    """
    if not torch.cuda.is_available():
        return False
    if torch.version.hip is not None:
        return True
    return torch.cuda.get_device_capability() >= (8, 9)


# ------------------------------------------------------------------------------- devices
def is_mlu_available(check_device: bool = False) -> bool:
    """Whether Cambricon's ``torch_mlu`` is installed and an MLU is present.

    The check goes through the device-management library (``PYTORCH_CNDEV_BASED_MLU_CHECK=1``),
    which leaves the MLU driver uninitialised, so processes can still be forked afterwards.

    Args:
        check_device: Also count the devices, so a broken driver answers False instead of
            raising.
    """
    from .._env._launcher import patch_environment

    with patch_environment(PYTORCH_CNDEV_BASED_MLU_CHECK="1"):
        return _vendor_device_available("torch_mlu", "mlu", check_device)


def is_musa_available(check_device: bool = False) -> bool:
    """Whether Moore Threads' ``torch_musa`` is installed and a MUSA GPU is present.

    Args:
        check_device: Also count the devices, so a broken driver answers False instead of
            raising.
    """
    return _vendor_device_available("torch_musa", "musa", check_device)


def is_sdaa_available(check_device: bool = False) -> bool:
    """Whether Tecorigin's ``torch_sdaa`` is installed and an SDAA is present.

    Args:
        check_device: Also count the devices, so a broken driver answers False instead of
            raising.
    """
    return _vendor_device_available("torch_sdaa", "sdaa", check_device)


def is_neuron_available(check_device: bool = False) -> bool:
    """Whether AWS Neuron's ``torch_neuronx`` is installed and a NeuronCore is present.

    Args:
        check_device: Also count the devices, so a broken driver answers False instead of
            raising.
    """
    return _vendor_device_available("torch_neuronx", "neuron", check_device)


def is_hpu_available(init_hccl: bool = False) -> bool:
    """Whether Intel Gaudi's ``habana_frameworks`` is installed and an HPU is present.

    Args:
        init_hccl: Also import the HCCL distributed backend, as a Gaudi run needs before it
            creates a process group.
    """
    if importlib.util.find_spec("habana_frameworks") is None:
        return False
    if importlib.util.find_spec("habana_frameworks.torch") is None:
        return False
    importlib.import_module("habana_frameworks.torch")
    if init_hccl:
        importlib.import_module("habana_frameworks.torch.distributed.hccl")
    hpu = getattr(torch, "hpu", None)
    return bool(hpu is not None and hpu.is_available())


def is_habana_gaudi1() -> bool:
    """Whether the HPU present is a first-generation Gaudi."""
    if not is_hpu_available():
        return False
    utils = importlib.import_module("habana_frameworks.torch.utils.experimental")
    synapse = getattr(utils, "synDeviceType", None)
    if synapse is None:
        return False
    return bool(utils._get_device_type() == synapse.synDeviceGaudi)


# ---------------------------------------------------------------------------- decorators
F = TypeVar("F", bound=Callable[..., Any])


def deepspeed_required(func: F) -> F:
    """Make ``func`` refuse to run when the current run does not use DeepSpeed.

    The check runs at call time, once the state exists; without a state the call goes ahead.

    Raises:
        ValueError: at call time, if the state's distributed type is not DeepSpeed.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from .._enums import DistributedType
        from .._process._accelerator_state import AcceleratorState

        if AcceleratorState._shared_state:
            kind = AcceleratorState().distributed_type
            if kind != DistributedType.DEEPSPEED:
                raise ValueError(
                    f"{func.__name__} needs a DeepSpeed run; this run's distributed type is "
                    f"{kind}. Create the Accelerator with a DeepSpeedPlugin (or launch with "
                    "--use_deepspeed) first."
                )
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def torchao_required(func: F) -> F:
    """Make ``func`` raise an ``ImportError`` naming the install command when torchao is
    missing."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not _is_package_available("torchao"):
            raise ImportError(
                f"{func.__name__} needs torchao, which is not installed. "
                'Install it with `pip install "accel-precision[torchao]"` (or `pip install torchao`).'
            )
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
