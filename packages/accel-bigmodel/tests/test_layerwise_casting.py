"""Layer-wise casting on CPU: parameter bytes, outputs against a model cast by hand, skips,
errors and removal."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from accel_bigmodel import (
    SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING,
    LayerwiseCastingHook,
    attach_layerwise_casting_hooks,
    remove_hook_from_submodules,
)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(2, 4, kernel_size=3, padding=1)
        self.proj = nn.Linear(8, 16)
        self.norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x).flatten(1)
        return self.head(self.norm(self.proj(x)))


def param_bytes(module: nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in module.parameters())


def cast_by_hand(model: nn.Module, storage: torch.dtype, compute: torch.dtype) -> nn.Module:
    """What the hooks should compute: the layers' weights rounded to ``storage``, run in
    ``compute``; other layers in ``compute`` as they are."""
    manual = copy.deepcopy(model)
    for module in manual.modules():
        if isinstance(module, SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING):
            module.to(storage)
    return manual.to(compute)


@pytest.mark.parametrize(
    ("storage", "compute"),
    [(torch.bfloat16, torch.float32), (torch.float8_e4m3fn, torch.bfloat16)],
)
def test_weights_stored_small_and_outputs_match_a_hand_cast(storage, compute) -> None:
    torch.manual_seed(0)
    model = Net().to(compute)
    manual = cast_by_hand(model, storage, compute)
    before = param_bytes(model)
    layers = [model.conv, model.proj, model.head]
    layer_elements = sum(p.numel() for m in layers for p in m.parameters())
    attach_layerwise_casting_hooks(model, storage, compute)
    saved = layer_elements * (compute.itemsize - storage.itemsize)
    assert param_bytes(model) == before - saved < before
    assert all(p.dtype == storage for m in layers for p in m.parameters())
    assert model.norm.weight.dtype == compute  # not a supported layer: untouched
    x = torch.randn(3, 2, 2).to(compute)
    with torch.no_grad():
        out = model(x)
        assert torch.equal(out, manual(x)) and out.dtype == compute
    assert all(p.dtype == storage for m in layers for p in m.parameters())
    assert isinstance(model.proj._hf_hook, LayerwiseCastingHook)


def test_skips_by_pattern_and_class() -> None:
    model = Net()
    attach_layerwise_casting_hooks(
        model,
        torch.bfloat16,
        torch.float32,
        skip_modules_pattern="^head$",
        skip_modules_classes=(nn.Conv1d,),
    )
    assert model.proj.weight.dtype == torch.bfloat16
    assert model.head.weight.dtype == torch.float32
    assert model.conv.weight.dtype == torch.float32
    assert not hasattr(model.head, "_hf_hook") and not hasattr(model.conv, "_hf_hook")


def test_a_failing_forward_leaves_weights_in_storage_dtype() -> None:
    model = Net()
    attach_layerwise_casting_hooks(model, torch.bfloat16, torch.float32)
    with pytest.raises(RuntimeError):
        model.proj(torch.ones(1, 3))  # wrong width
    assert model.proj.weight.dtype == torch.bfloat16


def test_removal_restores_forward() -> None:
    model = Net()
    attach_layerwise_casting_hooks(model, torch.bfloat16, torch.float32)
    remove_hook_from_submodules(model)
    assert not hasattr(model.proj, "_hf_hook")
    assert model.proj(torch.ones(1, 8).bfloat16()).dtype == torch.bfloat16  # stays stored


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match="storage_dtype"):
        attach_layerwise_casting_hooks(Net(), torch.int8, torch.float32)
    with pytest.raises(TypeError, match="compute_dtype"):
        LayerwiseCastingHook(torch.bfloat16, "float32", False)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="skip_modules_pattern"):
        attach_layerwise_casting_hooks(Net(), torch.bfloat16, torch.float32, (1,))  # type: ignore[arg-type]
