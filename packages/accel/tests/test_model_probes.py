"""is_peft_model, compiled regions, repeated blocks, DTensor and tensor-parallel probes, the
safe ``load`` and the main-process-only ``tqdm`` at ``accel.utils``."""

from __future__ import annotations

import importlib
import io
import os
import pickle
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from accel_state.testing import free_port, run_command

from accel.utils import (
    UnsafeCheckpointError,
    get_model_tp_size,
    has_compiled_regions,
    is_peft_model,
    load,
)
from accel.utils.other import TORCH_SAFE_GLOBALS, has_repeated_blocks, is_repeated_blocks

SCRIPTS = Path(__file__).parent / "scripts"


class PeftModel(torch.nn.Module):
    """A class named like peft's: recognised by name, as peft itself need not be importable."""


class AdapterWrapped(torch.nn.Module):
    """Carries PEFT's markers without the class name."""

    def __init__(self) -> None:
        super().__init__()
        self.base = torch.nn.Linear(2, 2)
        self.peft_config = {"default": object()}

    def get_base_model(self) -> torch.nn.Module:
        return self.base


def test_is_peft_model_by_name_markers_and_wrappers() -> None:
    assert is_peft_model(PeftModel()) is True
    assert is_peft_model(AdapterWrapped()) is True
    assert is_peft_model(torch.compile(AdapterWrapped())) is True
    assert is_peft_model(torch.nn.Linear(2, 2)) is False
    assert is_peft_model(SimpleNamespace(peft_config="not a mapping", get_base_model=len)) is False
    assert is_peft_model(None) is False and is_peft_model("text") is False


def blocks_model() -> torch.nn.Module:
    model = torch.nn.Module()
    model.layers = torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(3)])
    model.head = torch.nn.Linear(2, 1)
    return model


def test_repeated_blocks() -> None:
    model = blocks_model()
    assert is_repeated_blocks(model.layers) is True
    assert is_repeated_blocks(torch.nn.ModuleList()) is False
    assert (
        is_repeated_blocks(torch.nn.ModuleList([torch.nn.Linear(1, 1), torch.nn.ReLU()])) is False
    )
    assert is_repeated_blocks(model) is False
    assert has_repeated_blocks(model) is True
    assert has_repeated_blocks(torch.nn.Sequential(torch.nn.Linear(1, 1))) is False
    assert has_repeated_blocks(torch.nn.Linear(1, 1)) is False


def test_has_compiled_regions() -> None:
    model = blocks_model()
    assert has_compiled_regions(model) is False
    model.layers[0] = torch.compile(model.layers[0])  # compiles lazily, on first call
    assert has_compiled_regions(model) is True
    assert has_compiled_regions(torch.nn.Linear(1, 1)) is False


def test_get_model_tp_size() -> None:
    model = torch.nn.Linear(1, 1)
    assert get_model_tp_size(model) is None
    model.tp_size = 4
    assert get_model_tp_size(model) == 4
    new_style = torch.nn.Linear(1, 1)
    new_style.config = SimpleNamespace(distributed_config={"tp_size": 2})
    assert get_model_tp_size(new_style) == 2
    new_style.config = SimpleNamespace(distributed_config=SimpleNamespace(tp_size=8))
    assert get_model_tp_size(new_style) == 8


@pytest.mark.multiprocess
def test_model_has_dtensor_on_a_one_process_group() -> None:
    env = {"MASTER_PORT": str(free_port())}
    result = run_command([sys.executable, str(SCRIPTS / "dtensor_probe.py")], timeout=120, env=env)
    assert "DTENSOR OK" in result.stdout


class Exploit:
    def __reduce__(self):
        return (os.getcwd, ())


def test_load_reads_tensors_and_numpy_arrays(tmp_path) -> None:
    rng = np.random.get_state()
    path = tmp_path / "state.pt"
    torch.save({"w": torch.arange(3), "numpy": rng[1], "n": 3}, path)
    before = list(torch.serialization.get_safe_globals())
    loaded = load(path)
    assert torch.equal(loaded["w"], torch.arange(3))
    assert np.array_equal(loaded["numpy"], rng[1]) and loaded["n"] == 3
    after = list(torch.serialization.get_safe_globals())
    assert [g for g in TORCH_SAFE_GLOBALS if g in after] == [
        g for g in TORCH_SAFE_GLOBALS if g in before
    ]  # the process-wide allow-list did not grow
    assert TORCH_SAFE_GLOBALS and np.ndarray in TORCH_SAFE_GLOBALS
    buffer = io.BytesIO()
    torch.save([torch.ones(1)], buffer)
    buffer.seek(0)
    assert torch.equal(load(buffer, map_location="cpu")[0], torch.ones(1))


def test_load_refuses_code_unless_opted_in(tmp_path) -> None:
    path = tmp_path / "bad.pt"
    torch.save({"x": Exploit()}, path)
    with pytest.raises(UnsafeCheckpointError, match="weights_only=False") as info:
        load(path)
    assert str(path) in str(info.value)
    assert isinstance(info.value, pickle.UnpicklingError)
    assert load(path, weights_only=False)["x"] == os.getcwd()


def test_tqdm_is_the_function_at_both_paths() -> None:
    import accel.utils

    module = importlib.import_module("accel.utils.tqdm")
    assert callable(accel.utils.tqdm) and accel.utils.tqdm is module.tqdm
    from accel.utils import tqdm

    pytest.importorskip("tqdm", reason="draws a bar only where tqdm is installed")
    bar = tqdm(range(2), file=io.StringIO())
    assert bar.disable is False and list(bar) == [0, 1]
