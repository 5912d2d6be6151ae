"""``torch.compile`` through the Accelerator, whole and regional, on the GPU.

Outputs of the compiled model must match the eager model's within float32 tolerance (fused
kernels may round differently); regional compilation must compile each block of the list on its
own, in a new module that keeps the model as ``_orig_mod``.
"""

from __future__ import annotations

import pytest
import torch
from _gpu_models import TinyStack
from accel import Accelerator
from accel.utils import TorchDynamoPlugin, compile_regions

pytestmark = pytest.mark.cuda


def _pair():
    torch.manual_seed(0)
    eager = TinyStack(width=64).cuda().eval()
    other = TinyStack(width=64).cuda().eval()
    other.load_state_dict(eager.state_dict())
    ids = torch.randint(0, 64, (4, 16), device="cuda")
    return eager, other, ids


@pytest.fixture(autouse=True)
def _full_precision_matmuls():
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = previous
    torch._dynamo.reset()


@torch.no_grad()
def test_accelerator_compiles_the_model():
    eager, other, ids = _pair()
    accelerator = Accelerator(dynamo_backend="inductor")
    compiled = accelerator.prepare(other)
    assert hasattr(compiled, "_orig_mod"), type(compiled)
    torch.testing.assert_close(compiled(ids), eager(ids), rtol=1e-4, atol=1e-5)


@torch.no_grad()
def test_regional_compilation_compiles_each_block():
    eager, other, ids = _pair()
    plugin = TorchDynamoPlugin(backend="inductor", use_regional_compilation=True)
    compiled = Accelerator(dynamo_plugin=plugin).prepare(other)
    assert all(type(block).__name__ == "OptimizedModule" for block in compiled.blocks)
    assert type(compiled).__name__ != "OptimizedModule" and compiled._orig_mod is other
    torch.testing.assert_close(compiled(ids), eager(ids), rtol=1e-4, atol=1e-5)


@torch.no_grad()
def test_compile_regions_by_hand():
    eager, other, ids = _pair()
    compiled = compile_regions(other)
    torch.testing.assert_close(compiled(ids), eager(ids), rtol=1e-4, atol=1e-5)
