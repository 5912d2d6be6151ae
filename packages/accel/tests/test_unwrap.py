"""extract_model_from_parallel on real wrappers: DDP, DataParallel, compile, autocast."""

from __future__ import annotations

import pickle

import torch
import torch.distributed as dist
from torch import nn

from accel import Accelerator
from accel.utils import convert_outputs_to_fp32, extract_model_from_parallel, is_compiled_module


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


class _Doubler(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def test_reference_original_forward_is_restored_and_the_model_pickles():
    # Code written for the reference keeps the model's own forward as ``_original_forward``
    # before wrapping it; unwrapping without the fp32 wrapper gives that forward back.
    model = _Doubler()
    model._original_forward = model.forward
    model.forward = torch.autocast("cpu", dtype=torch.bfloat16)(model.forward)
    model.forward = convert_outputs_to_fp32(model.forward)
    plain = extract_model_from_parallel(model, keep_fp32_wrapper=False)
    assert plain is model
    assert "_original_forward" not in plain.__dict__ and "forward" not in plain.__dict__
    copy = pickle.loads(pickle.dumps(plain))
    assert copy(torch.ones(1)).tolist() == [2.0]


def test_reference_original_forward_of_an_instance_function_is_restored():
    model = _Doubler()

    def halve(x: torch.Tensor) -> torch.Tensor:
        return x / 2

    model.forward = halve
    model._original_forward = halve
    model.forward = convert_outputs_to_fp32(model.forward)
    plain = extract_model_from_parallel(model, keep_fp32_wrapper=False)
    assert plain.forward is halve and "_original_forward" not in plain.__dict__
    kept = _Doubler()
    kept._original_forward = kept.forward
    kept.forward = convert_outputs_to_fp32(kept.forward)
    assert extract_model_from_parallel(kept).forward is kept.forward  # the wrapper stays


def test_unrelated_original_forward_is_left_alone():
    # A forward that does not wrap ``_original_forward`` (a pipelined forward) is not undone.
    model = _Doubler()
    model._original_forward = model.forward

    def pipelined(x: torch.Tensor) -> torch.Tensor:
        return x

    model.forward = pipelined
    plain = extract_model_from_parallel(model, keep_fp32_wrapper=False)
    assert plain.forward is pipelined and "_original_forward" in plain.__dict__
