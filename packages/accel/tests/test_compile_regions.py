"""Regional compilation: ``compile_regions`` returns a new module whose repeated blocks (and
other leaves) are compiled one by one, and leaves the user's model as it was."""

from types import MethodType

import torch

from accel import Accelerator, compile_regions
from accel.utils import TorchDynamoPlugin, extract_model_from_parallel, has_compiled_regions


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


class Stack(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(4, 4)
        self.blocks = torch.nn.ModuleList([Block() for _ in range(3)])
        self.head = torch.nn.Linear(4, 2)
        self.tag = "original"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen = (self.tag, type(self.blocks[0]).__name__)
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def _compiled(module: torch.nn.Module) -> bool:
    return type(module).__name__ == "OptimizedModule"


def test_blocks_and_other_leaves_are_compiled_in_a_new_module():
    torch.manual_seed(0)
    model, x = Stack(), torch.randn(3, 4)
    expected = model(x)
    compiled = compile_regions(model, backend="eager")
    assert compiled is not model and compiled._orig_mod is model
    assert all(_compiled(block) for block in compiled.blocks)
    assert _compiled(compiled.embed) and _compiled(compiled.head)
    assert [b._orig_mod for b in compiled.blocks] == list(model.blocks)
    # The user's model is untouched and the weights are shared, not copied.
    assert not any(_compiled(m) for m in model.modules()) and not has_compiled_regions(model)
    assert {id(p) for p in compiled.parameters()} == {id(p) for p in model.parameters()}
    torch.testing.assert_close(compiled(x), expected)
    assert compiled.seen == ("original", "OptimizedModule")


def test_methods_bound_to_the_model_are_bound_to_the_new_module():
    model = Stack()

    def forward(self, x):
        return type(self).forward(self, x)

    model.forward = MethodType(forward, model)
    compiled = compile_regions(model, backend="eager")
    compiled.tag = "copy"
    assert compiled.__dict__["forward"].__self__ is compiled
    compiled(torch.ones(1, 4))
    assert compiled.seen == ("copy", "OptimizedModule") and not hasattr(model, "seen")


def test_a_module_without_repeated_blocks_is_compiled_whole():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    compiled = compile_regions(model, backend="eager")
    assert _compiled(compiled) and compiled._orig_mod is model


def test_unwrapping_gives_back_the_users_model():
    model = Stack()
    compiled = compile_regions(model, backend="eager")
    assert extract_model_from_parallel(compiled, keep_torch_compile=False) is model
    kept = extract_model_from_parallel(compiled)
    assert kept is compiled and kept._orig_mod is model


def test_the_accelerator_compiles_regions_and_unwraps_to_the_model():
    plugin = TorchDynamoPlugin(backend="eager", use_regional_compilation=True)
    accelerator = Accelerator(cpu=True, dynamo_plugin=plugin)
    model = Stack()
    prepared = accelerator.prepare(model)
    assert prepared is not model and all(_compiled(b) for b in prepared.blocks)
    assert prepared(torch.ones(2, 4)).shape == (2, 2)
    unwrapped = accelerator.unwrap_model(prepared, keep_torch_compile=False)
    assert unwrapped is model
    assert set(accelerator.get_state_dict(prepared)) == set(model.state_dict())
