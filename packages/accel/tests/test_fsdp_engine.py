"""FSDP in the Accelerator, in one process: wrapping units, ignored modules, plugin conflicts and
the launcher flag (the plugin itself is tested in accel-state; the 2-process runs are in
test_fsdp_multiprocess.py)."""

import pytest
import torch
from accel_state import patch_environment

from accel import Accelerator
from accel._engines.fsdp import _fsdp_build as build
from accel.utils import (
    DeepSpeedPlugin,
    FullyShardedDataParallelPlugin,
    get_module_class_from_name,
)


class Block(torch.nn.Module):
    def __init__(self, dim=4):
        super().__init__()
        self.inner = torch.nn.Linear(dim, dim)

    def forward(self, x):
        return self.inner(x)


def model():
    return torch.nn.Sequential(torch.nn.Linear(4, 4), Block(), Block(), torch.nn.Linear(4, 1))


def test_get_module_class_from_name():
    assert get_module_class_from_name(model(), "Block") is Block
    assert get_module_class_from_name(model(), "Linear") is torch.nn.Linear
    assert get_module_class_from_name(model(), "Missing") is None


def test_wrong_wrap_class_names_the_class_and_the_classes_present():
    plugin = FullyShardedDataParallelPlugin(transformer_cls_names_to_wrap=["Blok"])
    with pytest.raises(ValueError) as err:
        build.select_units(plugin, model())
    message = str(err.value)
    assert "'Blok'" in message and "'Block'" in message and "'Sequential'" in message


def test_units_transformer_and_size_based():
    net = model()
    units = build.select_units(
        FullyShardedDataParallelPlugin(transformer_cls_names_to_wrap=["Block"]), net
    )
    assert units == [net[2], net[1]]  # innermost first
    size = FullyShardedDataParallelPlugin(auto_wrap_policy="SIZE_BASED_WRAP", min_num_params=20)
    chosen = build.select_units(size, net)
    assert {id(m) for m in chosen} == {id(net[0]), id(net[1].inner), id(net[2].inner)}
    regex = FullyShardedDataParallelPlugin(ignored_modules=r"[12]")
    assert build.ignored_modules(regex, net) == [net[1], net[2]]


def test_fsdp_with_deepspeed_is_a_clear_error():
    with pytest.raises(ValueError, match="cannot be combined") as err:
        Accelerator(
            fsdp_plugin=FullyShardedDataParallelPlugin(), deepspeed_plugin=DeepSpeedPlugin()
        )
    assert "fsdp_plugin / deepspeed_plugin" in str(err.value)
    with patch_environment(ACCEL_USE_FSDP="1", ACCEL_USE_DEEPSPEED="1"):
        with pytest.raises(ValueError, match="cannot be combined"):
            Accelerator()


def test_wrong_plugin_type_is_a_clear_error():
    with pytest.raises(TypeError, match="fsdp_plugin must be a FullyShardedDataParallelPlugin"):
        Accelerator(fsdp_plugin={"fsdp_version": 2})


def test_launcher_flag_builds_the_plugin_and_one_process_trains_plainly():
    with patch_environment(ACCEL_USE_FSDP="1", ACCEL_FSDP_VERSION="2"):
        acc = Accelerator(cpu=True)
    assert isinstance(acc.state.fsdp_plugin, FullyShardedDataParallelPlugin)
    assert acc.distributed_type.value == "NO"  # one process: nothing to shard over
    net = torch.nn.Linear(2, 1)
    before = net.bias.detach().clone()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    net, opt = acc.prepare(net, opt)
    acc.backward(net(torch.ones(1, 2)).sum())
    opt.step()
    assert not torch.equal(net.bias.detach(), before)
    assert torch.equal(acc.get_state_dict(net)["bias"], net.bias.detach())


def test_checkpoint_forward_with_offload_keeps_the_gradients():
    torch.manual_seed(0)
    plain = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    grads = []
    for offload in (None, False, True):
        net = torch.nn.Sequential(*[type(m)(*()) if not m._parameters else m for m in plain])
        net.load_state_dict(plain.state_dict())
        if offload is not None:
            build.checkpoint_forward(net, offload=offload)
        x = torch.randn(5, 4, generator=torch.Generator().manual_seed(1))
        net(x).sum().backward()
        grads.append([p.grad.clone() for p in net.parameters()])
        net.zero_grad()
    for other in grads[1:]:
        assert all(torch.equal(a, b) for a, b in zip(grads[0], other))
