"""Which device family this machine runs on: the device, the collective backend and the
distributed type, decided from the availability probes in one fixed order.

Families, in the order they are tried for a distributed run (a vendor extension such as
``torch_npu`` can make CUDA calls land on its own device, so vendors come before CUDA):

=========  ==========  =========  ================
family     device      backend    distributed type
=========  ==========  =========  ================
MLU        ``mlu``     ``cncl``   ``MULTI_MLU``
SDAA       ``sdaa``    ``tccl``   ``MULTI_SDAA``
MUSA       ``musa``    ``mccl``   ``MULTI_MUSA``
NPU        ``npu``     ``hccl``   ``MULTI_NPU``
HPU        ``hpu``     ``hccl``   ``MULTI_HPU``
CUDA/ROCm  ``cuda``    ``nccl``   ``MULTI_GPU``
XPU        ``xpu``     ``xccl``   ``MULTI_XPU``
NEURON     ``neuron``  ``neuron`` ``MULTI_NEURON``
CPU        ``cpu``     ``gloo``   ``MULTI_CPU``
=========  ==========  =========  ================

A single process prefers Apple's ``mps`` before all of them. Every probe is looked up when it
is needed, so nothing here initialises a device driver.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._enums import DistributedType
from . import _availability, _probes


@dataclass(frozen=True)
class DeviceFamily:
    """One kind of accelerator and how a distributed run uses it."""

    device: str
    """The torch device type (``"npu"``)."""
    backend: str
    """The ``torch.distributed`` backend a multi-process run of this family uses."""
    distributed_type: DistributedType
    """The distributed type of a multi-process run."""


CPU = DeviceFamily("cpu", "gloo", DistributedType.MULTI_CPU)

FAMILIES: tuple[DeviceFamily, ...] = (
    DeviceFamily("mlu", "cncl", DistributedType.MULTI_MLU),
    DeviceFamily("sdaa", "tccl", DistributedType.MULTI_SDAA),
    DeviceFamily("musa", "mccl", DistributedType.MULTI_MUSA),
    DeviceFamily("npu", "hccl", DistributedType.MULTI_NPU),
    DeviceFamily("hpu", "hccl", DistributedType.MULTI_HPU),
    DeviceFamily("cuda", "nccl", DistributedType.MULTI_GPU),
    DeviceFamily("xpu", "xccl", DistributedType.MULTI_XPU),
    DeviceFamily("neuron", "neuron", DistributedType.MULTI_NEURON),
)
"""Accelerator families in the order a distributed run tries them (CPU comes last)."""


def family_available(device: str, *, for_distributed: bool = False) -> bool:
    """Whether accelerator family ``device`` (``"npu"``, ``"cuda"`` ...) is usable here.

    Args:
        device: A torch device type of `FAMILIES`, or ``"mps"`` / ``"cpu"``.
        for_distributed: Ask as a multi-process run does: Gaudi's HCCL backend is loaded, and
            an XPU counts only when torch has the XCCL backend.
    """
    if device == "cpu":
        return True
    if device == "hpu":
        return bool(_probes.is_hpu_available(init_hccl=for_distributed))
    if device == "xpu":
        return bool(_availability.is_xpu_available()) and (
            not for_distributed or bool(_probes.is_xccl_available())
        )
    probes = {
        "mps": _availability.is_mps_available,
        "cuda": _availability.is_cuda_available,
        "npu": _availability.is_npu_available,
        "mlu": _probes.is_mlu_available,
        "sdaa": _probes.is_sdaa_available,
        "musa": _probes.is_musa_available,
        "neuron": _probes.is_neuron_available,
    }
    if device not in probes:
        known = ["cpu", "mps", *(family.device for family in FAMILIES)]
        raise ValueError(f"device family must be one of {known}; got {device!r}. Pass one of them.")
    return bool(probes[device]())


def distributed_family(cpu: bool = False) -> DeviceFamily:
    """The family a multi-process run uses here: the first available of `FAMILIES`,
    else (or with ``cpu``) the CPU with gloo."""
    if not cpu:
        for family in FAMILIES:
            if family_available(family.device, for_distributed=True):
                return family
    return CPU


def prepare_backend(cpu: bool = False, backend: str | None = None) -> tuple[str, DistributedType]:
    """The backend and distributed type of a multi-process run on this machine.

    Args:
        cpu: Run on the CPU even when an accelerator is present.
        backend: A backend the user asked for; it replaces the family's default
            (``"mpi"`` on CPU, or ``"gloo"`` next to CUDA ...).

    Returns:
        ``(backend, distributed_type)``: ``("hccl", MULTI_NPU)`` on an Ascend machine,
        ``("gloo", MULTI_CPU)`` on a machine with no accelerator.
    """
    family = distributed_family(cpu)
    return backend or family.backend, family.distributed_type


def default_device_type(cpu: bool = False) -> str:
    """The device type of a single-process run: ``"mps"``, then the first available of
    `FAMILIES`, else ``"cpu"``.

    Args:
        cpu: Answer ``"cpu"`` whatever is present.
    """
    if cpu:
        return "cpu"
    if family_available("mps"):
        return "mps"
    for family in FAMILIES:
        if family_available(family.device):
            return family.device
    return "cpu"


def default_device(cpu: bool = False) -> torch.device:
    """The device of a single-process run (see `default_device_type`).

    Vendor families (``npu``, ``mlu`` ...) are valid torch device types once their extension
    is imported, which their probe does.
    """
    return torch.device(default_device_type(cpu))


def device_for_process(device_type: str, local_process_index: int) -> torch.device:
    """The device a process of a multi-process run uses, and make it the current one.

    Gaudi and Neuron runtimes give each process its device already (the current one); the
    other families take the local process index, wrapped around the device count.
    """
    if device_type == "cpu":
        return torch.device("cpu")
    module = getattr(torch, device_type)
    if device_type in ("hpu", "neuron"):
        return torch.device(device_type, module.current_device())
    index = local_process_index % max(1, int(module.device_count()))
    device = torch.device(device_type, index)
    module.set_device(device)
    return device


def get_current_device_type() -> tuple[str, str]:
    """``(device type, distributed type)`` of a multi-process run here, without initialising
    any device: ``("npu", "MULTI_NPU")`` on an Ascend machine, ``("cpu", "MULTI_CPU")`` on a
    machine with no accelerator."""
    family = distributed_family()
    return family.device, family.distributed_type.value


def accelerator_module() -> tuple[str, object] | None:
    """``(device type, torch.<device type>)`` of the first available accelerator family
    (``("npu", torch.npu)`` ...), for seeding and cache clearing; None on a CPU-only machine
    or on Apple MPS."""
    for family in FAMILIES:
        if family_available(family.device):
            module = getattr(torch, family.device, None)
            if module is not None:
                return family.device, module
    return None


__all__ = [
    "CPU",
    "FAMILIES",
    "DeviceFamily",
    "accelerator_module",
    "default_device",
    "default_device_type",
    "device_for_process",
    "distributed_family",
    "family_available",
    "get_current_device_type",
    "prepare_backend",
]
