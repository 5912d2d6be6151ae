"""Differential test: on a machine with one device family, accel and the reference library
pick the same backend and distributed type, and their probes take the same parameters.

No such device exists here: the availability probes of both libraries are replaced by the same
answers ("this machine has an NPU")."""

from __future__ import annotations

import inspect

import pytest
import torch

reference = pytest.importorskip(
    "accelerate", reason="the reference library is not installed (uv sync --group bench)"
)

import accel.utils  # noqa: E402
import accelerate.state as reference_state  # noqa: E402
import accelerate.utils  # noqa: E402
from accel_state._machine import _availability, _probes  # noqa: E402
from accel_state._machine import _families as _device_families  # noqa: E402

FAMILIES = ["mlu", "sdaa", "musa", "npu", "hpu", "cuda", "xpu", "neuron", "cpu"]
PROBE_NAMES = {
    "mlu": "is_mlu_available",
    "sdaa": "is_sdaa_available",
    "musa": "is_musa_available",
    "npu": "is_npu_available",
    "hpu": "is_hpu_available",
    "xpu": "is_xpu_available",
    "neuron": "is_neuron_available",
}
ACCEL_MODULES = {"npu": _availability, "xpu": _availability}


def machine_with(monkeypatch, family: str) -> None:
    for device, name in PROBE_NAMES.items():
        answer = device == family
        probe = lambda *a, _answer=answer, **k: _answer  # noqa: E731
        monkeypatch.setattr(reference_state, name, probe)
        monkeypatch.setattr(ACCEL_MODULES.get(device, _probes), name, probe)
    monkeypatch.setattr(reference_state, "is_torch_xla_available", lambda *a, **k: False)
    monkeypatch.setattr(reference_state, "is_xccl_available", lambda: True)
    monkeypatch.setattr(_probes, "is_xccl_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: family == "cuda")
    monkeypatch.setattr(_availability, "is_cuda_available", lambda: family == "cuda")


@pytest.mark.parametrize("family", FAMILIES)
def test_backend_and_distributed_type_match_the_reference(monkeypatch, family):
    machine_with(monkeypatch, family)
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    cpu = family == "cpu"
    theirs = reference_state.PartialState._prepare_backend(None, cpu=cpu)
    ours = _device_families.prepare_backend(cpu=cpu)
    assert (ours[0], ours[1].value) == (theirs[0], theirs[1].value)


@pytest.mark.parametrize("name", sorted(set(PROBE_NAMES.values())))
def test_probes_take_the_reference_parameters(name):
    ours = inspect.signature(getattr(accel.utils, name))
    theirs = inspect.signature(getattr(accelerate.utils, name))
    assert list(ours.parameters) == list(theirs.parameters)
    assert [p.default for p in ours.parameters.values()] == [
        p.default for p in theirs.parameters.values()
    ]
