"""Device families (MPS, XPU, NPU, HPU, MLU, MUSA, SDAA, NEURON): device, backend, distributed
type, seeding, generators and caches.

None of these devices exists on the test machines, so the availability probes are replaced by
answers ("this machine has an NPU"); the vendor extensions themselves are written as small real
packages on ``sys.path`` where the probe's own import logic is under test.
"""

from __future__ import annotations

import os
import sys
import types

import pytest
import torch

from accel_state import (
    DistributedType,
    PartialState,
    clear_device_cache,
    set_seed,
    should_reduce_batch_size,
    synchronize_rng_state,
    unsupported_distributed_type,
)
from accel_state._machine import _availability, _probes
from accel_state._machine import _families as _device_families
from accel_state.testing import reset_state

# family -> (backend, distributed type) of a multi-process run.
EXPECTED = {
    "mlu": ("cncl", DistributedType.MULTI_MLU),
    "sdaa": ("tccl", DistributedType.MULTI_SDAA),
    "musa": ("mccl", DistributedType.MULTI_MUSA),
    "npu": ("hccl", DistributedType.MULTI_NPU),
    "hpu": ("hccl", DistributedType.MULTI_HPU),
    "cuda": ("nccl", DistributedType.MULTI_GPU),
    "xpu": ("xccl", DistributedType.MULTI_XPU),
    "neuron": ("neuron", DistributedType.MULTI_NEURON),
}

# Device types torch knows without a vendor extension (the others are registered on import).
REGISTERED_IN_TORCH = {"cuda", "xpu", "hpu", "mps"}

PROBES = {
    "mps": (_availability, "is_mps_available"),
    "cuda": (_availability, "is_cuda_available"),
    "xpu": (_availability, "is_xpu_available"),
    "npu": (_availability, "is_npu_available"),
    "mlu": (_probes, "is_mlu_available"),
    "sdaa": (_probes, "is_sdaa_available"),
    "musa": (_probes, "is_musa_available"),
    "hpu": (_probes, "is_hpu_available"),
    "neuron": (_probes, "is_neuron_available"),
}


@pytest.fixture(autouse=True)
def fresh_state():
    reset_state()
    yield
    reset_state()


def machine_with(monkeypatch, *present, xccl=True):
    """Make the probes answer as on a machine that has exactly the families ``present``."""
    for family, (module, name) in PROBES.items():
        answer = family in present
        monkeypatch.setattr(module, name, lambda *a, _answer=answer, **k: _answer)
    monkeypatch.setattr(_probes, "is_xccl_available", lambda: xccl)


@pytest.mark.parametrize("family", sorted(EXPECTED))
def test_each_family_selects_its_device_backend_and_distributed_type(monkeypatch, family):
    machine_with(monkeypatch, family)
    backend, kind = EXPECTED[family]
    assert _device_families.prepare_backend() == (backend, kind)
    assert _device_families.default_device_type() == family
    assert _device_families.get_current_device_type() == (family, kind.value)
    if family in REGISTERED_IN_TORCH:
        assert _device_families.default_device() == torch.device(family)


def test_cpu_only_machine_and_cpu_flag(monkeypatch):
    machine_with(monkeypatch)
    assert _device_families.prepare_backend() == ("gloo", DistributedType.MULTI_CPU)
    assert _device_families.default_device() == torch.device("cpu")
    assert _device_families.get_current_device_type() == ("cpu", "MULTI_CPU")
    machine_with(monkeypatch, "npu")
    assert _device_families.prepare_backend(cpu=True) == ("gloo", DistributedType.MULTI_CPU)
    assert _device_families.prepare_backend(cpu=True, backend="mpi") == (
        "mpi",
        DistributedType.MULTI_CPU,
    )
    assert _device_families.default_device(cpu=True) == torch.device("cpu")


def test_an_explicit_backend_replaces_the_family_default(monkeypatch):
    machine_with(monkeypatch, "cuda")
    assert _device_families.prepare_backend(backend="gloo") == ("gloo", DistributedType.MULTI_GPU)


def test_vendor_extensions_come_before_cuda(monkeypatch):
    # torch_npu's transfer_to_npu makes CUDA report devices too: the NPU must win.
    machine_with(monkeypatch, "npu", "cuda")
    assert _device_families.prepare_backend() == ("hccl", DistributedType.MULTI_NPU)
    assert _device_families.default_device_type() == "npu"
    machine_with(monkeypatch, "cuda", "xpu", "neuron")
    assert _device_families.prepare_backend()[1] is DistributedType.MULTI_GPU


def test_mps_serves_one_process_only(monkeypatch):
    machine_with(monkeypatch, "mps")
    assert _device_families.default_device() == torch.device("mps")
    assert _device_families.prepare_backend() == ("gloo", DistributedType.MULTI_CPU)


def test_xpu_without_xccl_runs_distributed_on_cpu(monkeypatch):
    machine_with(monkeypatch, "xpu", xccl=False)
    assert _device_families.default_device() == torch.device("xpu")
    assert _device_families.prepare_backend() == ("gloo", DistributedType.MULTI_CPU)


def test_gaudi_loads_hccl_before_a_distributed_run(monkeypatch):
    asked = []
    machine_with(monkeypatch)
    monkeypatch.setattr(
        _probes, "is_hpu_available", lambda init_hccl=False: asked.append(init_hccl) or True
    )
    assert _device_families.prepare_backend() == ("hccl", DistributedType.MULTI_HPU)
    assert asked == [True]


def test_unknown_family_is_refused():
    with pytest.raises(ValueError, match=r"device family must be one of .*got 'tpu'"):
        _device_families.family_available("tpu")


@pytest.mark.parametrize("family", ["npu", "mlu", "hpu", "musa", "sdaa", "neuron"])
def test_partial_state_refuses_families_whose_runs_are_not_supported(monkeypatch, family):
    machine_with(monkeypatch, family)
    for name, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(name, value)
    kind = EXPECTED[family][1].value
    expected = unsupported_distributed_type(kind, f"{kind} (torch.{family} devices were detected)")
    assert expected is not None and "not supported by this version of accel" in expected
    with pytest.raises(NotImplementedError) as info:
        PartialState()
    assert str(info.value) == expected
    assert not torch.distributed.is_initialized()


def test_partial_state_single_process_takes_the_default_device(monkeypatch):
    machine_with(monkeypatch)
    state = PartialState()
    assert state.device == torch.device("cpu") and state.distributed_type is DistributedType.NO


class _DeviceModule(types.SimpleNamespace):
    """What a vendor extension registers as ``torch.<family>``: records the calls made."""

    def __init__(self) -> None:
        super().__init__(calls=[])

    def manual_seed_all(self, seed: int) -> None:
        self.calls.append(("manual_seed_all", seed))

    def empty_cache(self) -> None:
        self.calls.append(("empty_cache",))


@pytest.mark.parametrize("family", ["npu", "mlu", "musa", "sdaa", "hpu", "neuron"])
def test_set_seed_seeds_the_family_present(monkeypatch, family):
    machine_with(monkeypatch, family)
    module = _DeviceModule()
    monkeypatch.setattr(torch, family, module, raising=False)
    set_seed(1234)
    assert module.calls == [("manual_seed_all", 1234)]
    assert torch.initial_seed() == 1234


@pytest.mark.parametrize("family", ["npu", "mlu", "musa", "sdaa", "neuron"])
def test_clear_device_cache_empties_the_family_present(monkeypatch, family):
    machine_with(monkeypatch, family)
    module = _DeviceModule()
    monkeypatch.setattr(torch, family, module, raising=False)
    clear_device_cache(garbage_collection=True)
    assert module.calls == [("empty_cache",)]


def test_xpu_seed_and_cache_go_through_torch_xpu(monkeypatch):
    # torch.xpu is part of torch: only its two entry points are replaced.
    machine_with(monkeypatch, "xpu")
    module = _DeviceModule()
    monkeypatch.setattr(torch.xpu, "manual_seed_all", module.manual_seed_all)
    monkeypatch.setattr(torch.xpu, "empty_cache", module.empty_cache)
    set_seed(7)
    # torch.manual_seed seeds torch.xpu itself too; set_seed seeds it once more.
    assert set(module.calls) == {("manual_seed_all", 7)}
    clear_device_cache()
    assert module.calls[-1] == ("empty_cache",)


def test_gaudi_has_no_cache_to_empty(monkeypatch):
    machine_with(monkeypatch, "hpu")
    module = _DeviceModule()
    monkeypatch.setattr(torch, "hpu", module, raising=False)
    clear_device_cache()
    assert module.calls == []


@pytest.mark.parametrize("family", ["npu", "mlu", "musa", "sdaa", "hpu", "neuron"])
def test_generator_of_an_absent_family_is_refused(monkeypatch, family):
    machine_with(monkeypatch)
    with pytest.raises(ValueError, match=f"has no {family.upper()}.*Use 'torch' or 'generator'"):
        synchronize_rng_state(family)


def test_xla_generator_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"rng_type must be one of .*got 'xla'"):
        synchronize_rng_state("xla")


def test_out_of_memory_messages_of_each_family():
    assert should_reduce_batch_size(RuntimeError("MPS backend out of memory (MPS allocated ...)"))
    assert should_reduce_batch_size(
        RuntimeError("FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for 2 GB")
    )
    assert should_reduce_batch_size(RuntimeError("NPU out of memory. Tried to allocate 2 GiB"))
    assert not should_reduce_batch_size(RuntimeError("shape mismatch"))


# ------------------------------------------------------------------ probes on real packages
@pytest.fixture
def extension(tmp_path, monkeypatch):
    """Write a vendor extension package named ``module`` that registers ``torch.<family>``."""
    written = []

    def write(module: str, family: str, body: str) -> None:
        package = tmp_path / module
        package.mkdir()
        (package / "__init__.py").write_text(
            f"import types\nimport torch\n{body}\ntorch.{family} = device\n"
        )
        written.append((module, family))

    monkeypatch.syspath_prepend(str(tmp_path))
    yield write
    for module, family in written:
        sys.modules.pop(module, None)
        if hasattr(torch, family):
            delattr(torch, family)


def test_probe_is_false_without_the_extension():
    assert not _probes.is_sdaa_available() and not _probes.is_sdaa_available(check_device=True)
    assert not _availability.is_npu_available() and not _availability.is_npu_available(
        check_device=True
    )


def test_probe_imports_the_extension_and_asks_for_a_device(extension):
    extension(
        "torch_sdaa",
        "sdaa",
        "device = types.SimpleNamespace(is_available=lambda: True, device_count=lambda: 2)",
    )
    assert _probes.is_sdaa_available() and _probes.is_sdaa_available(check_device=True)


def test_installed_extension_without_a_device_is_false(extension):
    extension(
        "torch_musa",
        "musa",
        "device = types.SimpleNamespace(is_available=lambda: False, device_count=lambda: 0)",
    )
    assert not _probes.is_musa_available()


def test_check_device_turns_a_driver_error_into_false(extension):
    extension(
        "torch_neuronx",
        "neuron",
        "def count():\n    raise RuntimeError('no driver')\n"
        "device = types.SimpleNamespace(is_available=lambda: True, device_count=count)",
    )
    assert _probes.is_neuron_available()
    assert not _probes.is_neuron_available(check_device=True)


def test_npu_extension_that_fails_to_import_is_false(extension):
    extension("torch_npu", "npu", "raise ImportError('libascendcl.so: cannot open')\ndevice = None")
    assert not _availability.is_npu_available()


def test_mlu_probe_uses_the_driver_free_check(extension):
    extension(
        "torch_mlu",
        "mlu",
        "import os\ndevice = types.SimpleNamespace(\n"
        "    is_available=lambda: os.environ.get('PYTORCH_CNDEV_BASED_MLU_CHECK') == '1',\n"
        "    device_count=lambda: 1)",
    )
    assert _probes.is_mlu_available()
    assert "PYTORCH_CNDEV_BASED_MLU_CHECK" not in os.environ
