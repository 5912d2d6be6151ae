import copy

import pytest
import torch

pytest.importorskip(
    "torchao.float8", reason='needs torchao: pip install "accel-precision[torchao]"'
)

from torchao.float8.float8_linear import Float8Linear

from accel_precision import (
    AORecipeKwargs,
    convert_model_to_fp8,
    filter_linear_layers,
    find_first_last_linear_layers,
    has_ao_layers,
)


def mlp(width: int = 128) -> torch.nn.Sequential:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(32, width),
        torch.nn.GELU(),
        torch.nn.Linear(width, width),
        torch.nn.GELU(),
        torch.nn.Linear(width, width),
        torch.nn.GELU(),
        torch.nn.Linear(width, 8),
    )


def test_first_and_last_linear_layers():
    assert find_first_last_linear_layers(mlp()) == ("0", "6")
    assert find_first_last_linear_layers(torch.nn.ReLU()) == (None, None)


def test_filter_needs_multiples_of_16_and_skips_listed_names():
    assert filter_linear_layers(torch.nn.Linear(32, 64), "a.b", []) is True
    assert filter_linear_layers(torch.nn.Linear(30, 64), "a.b", []) is False
    assert filter_linear_layers(torch.nn.Linear(32, 64), "a.b", ["a"]) is False
    assert filter_linear_layers(torch.nn.Linear(32, 64), "ab", ["a"]) is True
    assert filter_linear_layers(torch.nn.ReLU(), "x", []) is False


def test_default_conversion_keeps_first_and_last_layers_and_parameters():
    model = mlp()
    params = list(model.parameters())
    replaced = convert_model_to_fp8(model, AORecipeKwargs())
    kinds = [type(model[i]) for i in (0, 2, 4, 6)]
    assert kinds == [torch.nn.Linear, Float8Linear, Float8Linear, torch.nn.Linear]
    assert replaced == {}
    assert all(a is b for a, b in zip(params, model.parameters()))
    assert has_ao_layers(model)


def test_skip_modules_filter_function_and_first_last_option():
    model = mlp()
    convert_model_to_fp8(model, AORecipeKwargs(skip_first_last=False, skip_modules=["4"]))
    assert [type(model[i]) is Float8Linear for i in (0, 2, 4, 6)] == [True, True, False, False]
    # 8 output features is not a multiple of 16: layer 6 cannot run torch._scaled_mm.
    model = mlp()
    convert_model_to_fp8(model, AORecipeKwargs(module_filter_func=lambda m, name: name == "4"))
    assert [type(model[i]) is Float8Linear for i in (0, 2, 4, 6)] == [False, False, True, False]


def test_fsdp_all_gather_weights_are_new_parameters_and_optimizer_follows():
    from accel_precision import switch_optimizer_parameters

    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    replaced = convert_model_to_fp8(model, AORecipeKwargs(enable_fsdp_float8_all_gather=True))
    assert len(replaced) == 2  # the weights of the two converted layers
    switch_optimizer_parameters(optimizer, replaced)
    assert {id(p) for p in optimizer.param_groups[0]["params"]} == {
        id(p) for p in model.parameters()
    }


def train(model: torch.nn.Module, steps: int = 40) -> list[float]:
    torch.manual_seed(1)
    teacher = torch.nn.Linear(32, 8)
    data = torch.randn(steps, 64, 32)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for x in data:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(x)
        loss = torch.nn.functional.mse_loss(out.float(), teacher(x).detach())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses


def test_fp8_training_converges_close_to_bf16():
    reference = mlp(64)
    fp8 = copy.deepcopy(reference)
    convert_model_to_fp8(fp8, AORecipeKwargs())
    bf16_losses = train(reference)
    fp8_losses = train(fp8)
    assert fp8[2].weight.grad is None and fp8[2].weight.dtype == torch.float32
    # Both learn: the last 10 steps average under a third of the first step's loss
    # (measured here: 0.338 -> 0.080).
    for losses in (bf16_losses, fp8_losses):
        assert sum(losses[-10:]) / 10 < losses[0] / 3
    # And FP8 ends within 10% of bf16 (measured here: 1%).
    end_bf16, end_fp8 = sum(bf16_losses[-10:]) / 10, sum(fp8_losses[-10:]) / 10
    assert abs(end_fp8 - end_bf16) / end_bf16 < 0.10, (end_bf16, end_fp8)
