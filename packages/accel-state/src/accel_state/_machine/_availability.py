"""Availability checks for optional libraries and hardware. None of them imports the library."""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import operator

import torch

_OPERATORS = {
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">=": operator.ge,
    ">": operator.gt,
}


def _parse_version(text: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in text.split("+")[0].split("."):
        digits = "".join(ch for ch in piece if ch.isdecimal())
        if not digits:
            break
        parts.append(int(digits))
        if not piece.isdecimal():
            break
    return tuple(parts)


def compare_versions(library_or_version: str, operation: str, requirement_version: str) -> bool:
    """Compare the installed version of a library (or a version string) with a reference.

    Args:
        library_or_version: A distribution name such as ``"torch"`` or a version such as ``"2.4.0"``.
        operation: One of ``<``, ``<=``, ``==``, ``!=``, ``>=``, ``>``.
        requirement_version: The version to compare with.
    """
    if operation not in _OPERATORS:
        raise ValueError(
            f"operation must be one of {list(_OPERATORS)}; got {operation!r}. Use e.g. '>='."
        )
    version = library_or_version
    if not version[:1].isdecimal():
        version = importlib.metadata.version(library_or_version)
    return _OPERATORS[operation](_parse_version(version), _parse_version(requirement_version))


def is_torch_version(operation: str, version: str) -> bool:
    """Compare the installed torch version with ``version`` using ``operation`` (e.g. ``">="``)."""
    return compare_versions(torch.__version__, operation, version)


@functools.cache
def _is_package_available(name: str, distribution: str | None = None) -> bool:
    if importlib.util.find_spec(name) is None:
        return False
    try:
        importlib.metadata.version(distribution or name)
    except importlib.metadata.PackageNotFoundError:
        return distribution is None
    return True


def is_cuda_available() -> bool:
    """Whether a CUDA device can be used."""
    return torch.cuda.is_available()


def is_mps_available(min_version: str = "1.12") -> bool:
    """Whether Apple's MPS device can be used with torch ``>= min_version``."""
    if not is_torch_version(">=", min_version):
        return False
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available() and mps.is_built())


def is_xpu_available(check_device: bool = False) -> bool:
    """Whether an Intel XPU can be used through stock torch (``torch.xpu``, torch >= 2.7).

    Args:
        check_device: Also count the devices, so a broken driver answers False instead of
            raising.
    """
    if is_torch_version("<", "2.7"):
        return False
    return _device_present("xpu", check_device)


def is_npu_available(check_device: bool = False) -> bool:
    """Whether Ascend's ``torch_npu`` is installed and an NPU is present.

    An installed ``torch_npu`` that fails to import (a CPU-only container) answers False.

    Args:
        check_device: Also count the devices, so a broken driver answers False instead of
            raising.
    """
    return _vendor_device_available(
        "torch_npu", "npu", check_device, import_errors_mean_absent=True
    )


def _vendor_device_available(
    module: str,
    attribute: str,
    check_device: bool,
    *,
    import_errors_mean_absent: bool = False,
) -> bool:
    """Whether vendor extension ``module`` is installed and ``torch.<attribute>`` has a device.

    Args:
        module: The extension to import (``"torch_npu"``), which registers ``torch.<attribute>``.
        attribute: The device family (``"npu"``).
        check_device: Also count the devices, so a broken driver answers False instead of
            raising.
        import_errors_mean_absent: An import that raises answers False instead of raising.
    """
    if importlib.util.find_spec(module) is None:
        return False
    try:
        importlib.import_module(module)
    except Exception:
        if import_errors_mean_absent:
            return False
        raise
    return _device_present(attribute, check_device)


def _device_present(attribute: str, check_device: bool) -> bool:
    """Whether ``torch.<attribute>`` exists and reports a device."""
    family = getattr(torch, attribute, None)
    if family is None:
        return False
    if check_device:
        try:
            family.device_count()
        except RuntimeError:
            return False
    return bool(family.is_available())


def is_torch_xla_available(check_is_tpu: bool = False, check_is_gpu: bool = False) -> bool:
    """Whether ``torch_xla`` is installed and not switched off (``USE_TORCH_XLA=0``).

    Args:
        check_is_tpu: Also require its PJRT device to be a TPU (imports ``torch_xla``).
        check_is_gpu: Also require its PJRT device to be a GPU (imports ``torch_xla``).
    """
    from ._xla_runtime import torch_xla_usable, xla_device_type

    if check_is_tpu and check_is_gpu:
        raise ValueError(
            "is_torch_xla_available checks one device kind at a time; got check_is_tpu=True "
            "and check_is_gpu=True. Pass one of them."
        )
    if not torch_xla_usable():
        return False
    if check_is_tpu:
        return xla_device_type() == "TPU"
    if check_is_gpu:
        return xla_device_type() in ("GPU", "CUDA")
    return True


def is_tpu_available(check_device: bool = True) -> bool:
    """Whether ``torch_xla`` is usable (the reference's older name for the check)."""
    return is_torch_xla_available()


def is_bf16_available(ignore_tpu: bool = False) -> bool:
    """Whether bf16 arithmetic is supported on the current device (CPU bf16 counts)."""
    if is_cuda_available():
        return torch.cuda.is_bf16_supported()
    return True


def is_fp16_available() -> bool:
    """Whether fp16 mixed precision can run (CPU autocast supports fp16 since torch 2.4)."""
    return True


def is_fp8_available() -> bool:
    """Whether an FP8 backend (torchao, Transformer Engine or MS-AMP) is installed."""
    return any(_is_package_available(name) for name in ("torchao", "transformer_engine", "msamp"))


def is_deepspeed_available() -> bool:
    """Whether DeepSpeed is installed."""
    return _is_package_available("deepspeed")


def is_bnb_available(min_version: str | None = None) -> bool:
    """Whether bitsandbytes is installed (at version ``>= min_version`` when given)."""
    return _is_at_least("bitsandbytes", min_version)


def _is_at_least(distribution: str, min_version: str | None, module: str | None = None) -> bool:
    """Whether ``distribution`` is installed, at version ``>= min_version`` when given."""
    if not _is_package_available(module or distribution, distribution):
        return False
    if min_version is None:
        return True
    return compare_versions(distribution, ">=", min_version)


def is_torchao_available() -> bool:
    """Whether torchao is installed."""
    return _is_package_available("torchao")


def is_transformer_engine_available() -> bool:
    """Whether NVIDIA Transformer Engine is installed."""
    return _is_package_available("transformer_engine", "transformer-engine")


def is_msamp_available() -> bool:
    """Whether MS-AMP is installed."""
    return _is_package_available("msamp", "msamp")


def is_transformers_available() -> bool:
    """Whether transformers is installed."""
    return _is_package_available("transformers")


def is_datasets_available() -> bool:
    """Whether datasets is installed."""
    return _is_package_available("datasets")


def is_safetensors_available() -> bool:
    """Whether safetensors is installed."""
    return _is_package_available("safetensors")


def is_tensorboard_available() -> bool:
    """Whether a TensorBoard writer is installed."""
    return _is_package_available("tensorboard") or _is_package_available("tensorboardX")


def is_wandb_available() -> bool:
    """Whether Weights & Biases is installed."""
    return _is_package_available("wandb")


def is_comet_ml_available() -> bool:
    """Whether Comet ML is installed."""
    return _is_package_available("comet_ml", "comet-ml")


def is_dvclive_available() -> bool:
    """Whether DVCLive is installed."""
    return _is_package_available("dvclive")


def is_mlflow_available() -> bool:
    """Whether MLflow is installed."""
    return _is_package_available("mlflow")


def is_aim_available() -> bool:
    """Whether Aim is installed."""
    return _is_package_available("aim")


def is_clearml_available() -> bool:
    """Whether ClearML is installed."""
    return _is_package_available("clearml")


def is_pippy_available() -> bool:
    """Whether ``torch.distributed.pipelining`` (or the older ``torchpippy``) is usable."""
    return importlib.util.find_spec("torch.distributed.pipelining") is not None or (
        _is_package_available("pippy", "torchpippy")
    )


def is_megatron_lm_available() -> bool:
    """Whether Megatron-LM core is installed."""
    return _is_package_available("megatron")


def is_rich_available() -> bool:
    """Whether rich is installed."""
    return _is_package_available("rich")
