import pytest
import torch
from bigmodel_helpers import Block
from torch import nn

from accel_bigmodel import (
    AlignDevicesHook,
    ModelHook,
    SequentialHook,
    add_hook_to_module,
    attach_align_device_hook,
    cpu_offload,
    cpu_offload_with_hook,
    remove_hook_from_module,
    remove_hook_from_submodules,
)


class AddOne(ModelHook):
    def pre_forward(self, module, *args, **kwargs):
        return (args[0] + 1,), kwargs


class Double(ModelHook):
    def post_forward(self, module, output):
        return output * 2


class Recorder(ModelHook):
    def __init__(self):
        self.events = []

    def init_hook(self, module):
        self.events.append("init")
        return module

    def detach_hook(self, module):
        self.events.append("detach")
        return module


def _identity_linear():
    layer = nn.Linear(3, 3, bias=False)
    with torch.no_grad():
        layer.weight.copy_(torch.eye(3))
    return layer


def test_add_and_remove_hook():
    layer = _identity_linear()
    x = torch.ones(1, 3)
    add_hook_to_module(layer, AddOne())
    assert torch.equal(layer(x), x + 1)
    assert isinstance(layer._hf_hook, AddOne)
    remove_hook_from_module(layer)
    assert torch.equal(layer(x), x)
    assert not hasattr(layer, "_hf_hook") and not hasattr(layer, "_old_forward")
    assert "forward" not in layer.__dict__


def test_replace_and_append_hooks():
    layer = _identity_linear()
    x = torch.ones(1, 3)
    add_hook_to_module(layer, AddOne())
    add_hook_to_module(layer, Double())
    assert torch.equal(layer(x), x * 2)  # replaced
    add_hook_to_module(layer, AddOne(), append=True)
    assert isinstance(layer._hf_hook, SequentialHook)
    assert torch.equal(layer(x), (x + 1) * 2)


def test_sequential_hook_order_and_lifecycle():
    rec = Recorder()
    layer = _identity_linear()
    add_hook_to_module(layer, SequentialHook(AddOne(), Double(), rec))
    assert torch.equal(layer(torch.zeros(1, 3)), torch.full((1, 3), 2.0))
    remove_hook_from_module(layer)
    assert rec.events == ["init", "detach"]


def test_no_grad_hook():
    class NoGrad(ModelHook):
        no_grad = True

    layer = nn.Linear(2, 2)
    add_hook_to_module(layer, NoGrad())
    assert not layer(torch.ones(1, 2)).requires_grad


def test_remove_recursively():
    model = nn.Sequential(_identity_linear(), _identity_linear())
    for child in model:
        add_hook_to_module(child, AddOne())
    remove_hook_from_submodules(model)
    assert torch.equal(model(torch.ones(1, 3)), torch.ones(1, 3))


def test_align_devices_hook_offload_keeps_weights_out_of_the_module():
    torch.manual_seed(0)
    block = Block(8)
    x = torch.randn(2, 8)
    expected = block(x)
    hook = AlignDevicesHook(execution_device="cpu", offload=True, place_submodules=True)
    add_hook_to_module(block, hook)
    assert block.up.weight.device.type == "meta"
    torch.testing.assert_close(block(x), expected)
    assert block.up.weight.device.type == "meta"
    remove_hook_from_module(block)
    assert block.up.weight.device.type == "cpu"
    torch.testing.assert_close(block(x), expected)


def test_attach_align_device_hook_per_leaf_with_weights_map():
    torch.manual_seed(0)
    model = nn.Sequential(Block(8), Block(8))
    x = torch.randn(2, 8)
    expected = model(x)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    attach_align_device_hook(model, execution_device="cpu", offload=True, weights_map=weights)
    assert model[0].up.weight.device.type == "meta"
    assert isinstance(model[0].up._hf_hook, AlignDevicesHook)
    torch.testing.assert_close(model(x), expected)


def test_cpu_offload_matches():
    torch.manual_seed(0)
    model = nn.Sequential(Block(8), Block(8))
    x = torch.randn(2, 8)
    expected = model(x)
    cpu_offload(model, execution_device="cpu")
    assert all(p.device.type == "meta" for p in model.parameters())
    torch.testing.assert_close(model(x), expected)
    torch.testing.assert_close(model(x), expected)


def test_cpu_offload_with_hook_chains():
    first, second = _identity_linear(), _identity_linear()
    first, hook1 = cpu_offload_with_hook(first, execution_device="cpu")
    second, hook2 = cpu_offload_with_hook(second, execution_device="cpu", prev_module_hook=hook1)
    x = torch.ones(1, 3)
    assert torch.equal(second(first(x)), x)
    hook2.offload()
    hook2.remove()
    assert not hasattr(second, "_hf_hook")


def test_meta_tensor_without_value_is_a_clear_error():
    from accel_bigmodel import set_module_tensor_to_device

    layer = nn.Linear(2, 2, device="meta")
    with pytest.raises(ValueError, match="meta device.*value="):
        set_module_tensor_to_device(layer, "weight", "cpu")
