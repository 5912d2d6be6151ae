"""extract_model_from_parallel on real wrappers: DDP, DataParallel, compile, autocast."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from accel import Accelerator
from accel.utils import extract_model_from_parallel, is_compiled_module


def test_ddp_and_data_parallel_are_removed(tmp_path):
    model = nn.Linear(2, 2)
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    try:
        ddp = nn.parallel.DistributedDataParallel(model)
        assert extract_model_from_parallel(ddp) is model
        assert extract_model_from_parallel(nn.DataParallel(ddp)) is model
    finally:
        dist.destroy_process_group()


def test_compiled_model_is_kept_or_removed():
    model = nn.Linear(2, 2)
    compiled = torch.compile(nn.DataParallel(model))
    assert is_compiled_module(compiled) and not is_compiled_module(model)
    kept = extract_model_from_parallel(compiled)
    assert kept is compiled and compiled._orig_mod is model
    assert extract_model_from_parallel(compiled, keep_torch_compile=False) is model


def test_recursive_unwraps_submodules_in_place():
    inner = nn.Linear(2, 2)
    model = nn.Sequential(nn.DataParallel(inner), nn.Sequential(nn.DataParallel(nn.ReLU())))
    out = extract_model_from_parallel(model, recursive=True)
    assert out is model and model[0] is inner and isinstance(model[1][0], nn.ReLU)
    wrapped = nn.Sequential(nn.DataParallel(nn.Linear(1, 1)))
    assert isinstance(extract_model_from_parallel(wrapped)[0], nn.DataParallel)


def test_fp32_wrapper_is_removed_on_request():
    accelerator = Accelerator(cpu=True, mixed_precision="bf16")
    model = accelerator.prepare(nn.Linear(2, 2))
    x = torch.ones(1, 2)
    assert model(x).dtype == torch.float32  # the wrapper converts the bf16 output back
    kept = extract_model_from_parallel(model)
    assert "_accel_original_forward" in kept.__dict__
    plain = extract_model_from_parallel(model, keep_fp32_wrapper=False)
    assert "_accel_original_forward" not in plain.__dict__
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert plain(x).dtype == torch.bfloat16
