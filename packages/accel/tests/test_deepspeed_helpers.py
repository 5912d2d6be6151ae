"""The DeepSpeed helpers of accel.utils on CPU: the active plugin, the CPU optimizers (real
DeepSpeed ops, compared step by step with torch), and regional compilation in place."""

import copy

import pytest
import torch
from accel_state import AcceleratorState, DeepSpeedPlugin, GradientState

from accel import Accelerator
from accel.utils import (
    compile_regions_deepspeed,
    get_active_deepspeed_plugin,
    map_pytorch_optim_to_deepspeed,
)


@pytest.fixture(autouse=True)
def _fresh_state():
    yield
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()


def test_active_plugin_follows_the_selection():
    plugins = {"a": DeepSpeedPlugin(zero_stage=2), "b": DeepSpeedPlugin(zero_stage=3)}
    acc = Accelerator(cpu=True, deepspeed_plugins=plugins)
    assert get_active_deepspeed_plugin(acc.state) is plugins["a"]
    acc.state.select_deepspeed_plugin("b")
    assert get_active_deepspeed_plugin(acc.state) is plugins["b"]


def test_active_plugin_without_deepspeed_says_how_to_enable_it():
    acc = Accelerator(cpu=True)
    with pytest.raises(ValueError, match=r"got distributed_type=NO\. Pass deepspeed_plugin="):
        get_active_deepspeed_plugin(acc.state)


def _train(optimizer, model, steps=3):
    torch.manual_seed(1)
    for _ in range(steps):
        optimizer.zero_grad()
        model(torch.randn(8, 4)).pow(2).mean().backward()
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


def _pair(optimizer_class, **kwargs):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    twin = copy.deepcopy(model)
    return model, optimizer_class(model.parameters(), **kwargs), twin


@pytest.mark.timeout(1500)  # DeepSpeed compiles its CPU Adam op on first use
@pytest.mark.parametrize(
    ("torch_class", "adamw_mode"), [(torch.optim.Adam, False), (torch.optim.AdamW, True)]
)
def test_adam_and_adamw_become_cpu_adam_and_train_the_same(torch_class, adamw_mode):
    pytest.importorskip("deepspeed", reason="needs deepspeed: pip install 'accel-torch[deepspeed]'")
    from deepspeed.ops.adam import DeepSpeedCPUAdam

    model, reference, twin = _pair(torch_class, lr=0.05, weight_decay=0.1, betas=(0.8, 0.9))
    mapped = map_pytorch_optim_to_deepspeed(
        torch_class(twin.parameters(), lr=0.05, weight_decay=0.1, betas=(0.8, 0.9))
    )
    assert type(mapped) is DeepSpeedCPUAdam and mapped.adam_w_mode is adamw_mode
    assert mapped.param_groups[0]["betas"] == (0.8, 0.9)
    expected, got = _train(reference, model), _train(mapped, twin)
    for want, have in zip(expected, got):
        torch.testing.assert_close(have, want, rtol=1e-4, atol=1e-5)


def test_adagrad_is_mapped_to_cpu_adagrad():
    # The class choice only: building DeepSpeedCPUAdagrad compiles another C++ op (many
    # minutes on a loaded machine), and its arithmetic is DeepSpeed's own.
    pytest.importorskip("deepspeed", reason="needs deepspeed: pip install 'accel-torch[deepspeed]'")
    from deepspeed.ops.adagrad import DeepSpeedCPUAdagrad

    from accel._engines.deepspeed._deepspeed_helpers import _deepspeed_class

    optimizer = torch.optim.Adagrad(torch.nn.Linear(2, 2).parameters(), lr=0.05)
    assert _deepspeed_class(optimizer) == (DeepSpeedCPUAdagrad, {})


def test_optimizers_without_a_deepspeed_counterpart_are_refused():
    model = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match=r"got torch\.optim\.sgd\.SGD, which has no DeepSpeed"):
        map_pytorch_optim_to_deepspeed(torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(ValueError, match=r"amsgrad=True in parameter group\(s\) \[0\] of Adam"):
        map_pytorch_optim_to_deepspeed(torch.optim.Adam(model.parameters(), amsgrad=True))


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.linear(x))


class _Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(4, 4)
        self.blocks = torch.nn.ModuleList(_Block() for _ in range(3))
        self.head = torch.nn.Linear(4, 2)

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def test_compile_regions_deepspeed_compiles_blocks_in_place():
    model = _Model()
    x = torch.randn(3, 4)
    expected = model(x)
    assert compile_regions_deepspeed(model, backend="eager") is None
    # Each block, and each module outside the block list, is compiled in place.
    compiled = {name for name, m in model.named_modules() if m._compiled_call_impl is not None}
    assert compiled == {"embed", "blocks.0", "blocks.1", "blocks.2", "head"}
    assert type(model) is _Model and isinstance(model.blocks[0], _Block)
    torch.testing.assert_close(model(x), expected)
    single = torch.nn.Linear(4, 2)
    compile_regions_deepspeed(single, backend="eager")
    assert single._compiled_call_impl is not None
