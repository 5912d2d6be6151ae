import importlib.util
from pathlib import Path

import pytest
import torch
from accel_state.testing import run_distributed

from accel import Accelerator
from accel.utils import AORecipeKwargs, FP8RecipeKwargs

HAS_TORCHAO = importlib.util.find_spec("torchao") is not None
HAS_TE = importlib.util.find_spec("transformer_engine") is not None
needs_torchao = pytest.mark.skipif(
    not HAS_TORCHAO, reason='needs torchao: pip install "accel-precision[torchao]"'
)
SCRIPTS = Path(__file__).parent / "scripts"


def mlp() -> torch.nn.Sequential:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 4),
    )


@needs_torchao
def test_fp8_converts_inner_linear_layers_and_trains():
    from torchao.float8.float8_linear import Float8Linear

    accelerator = Accelerator(mixed_precision="fp8", cpu=True)
    assert accelerator.fp8_backend == "AO"
    model = mlp()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model, optimizer = accelerator.prepare(model, optimizer)
    assert [type(model[i]) for i in (0, 2, 4)] == [torch.nn.Linear, Float8Linear, torch.nn.Linear]
    prepared = {id(p) for group in optimizer.param_groups for p in group["params"]}
    assert prepared == {id(p) for p in model.parameters()}
    torch.manual_seed(1)
    x, y = torch.randn(64, 16), torch.randn(64, 4)
    losses = []
    for _ in range(15):
        out = model(x)
        assert out.dtype == torch.float32  # outputs come back in fp32 from the bf16 region
        loss = torch.nn.functional.mse_loss(out, y)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0], losses


@needs_torchao
def test_ao_recipe_handler_chooses_the_layers():
    from torchao.float8.float8_linear import Float8Linear

    recipe = AORecipeKwargs(skip_first_last=False, skip_modules=["2"])
    accelerator = Accelerator(mixed_precision="fp8", cpu=True, kwargs_handlers=[recipe])
    model = accelerator.prepare(mlp())
    assert [type(model[i]) is Float8Linear for i in (0, 2, 4)] == [True, False, False]


def test_recipe_without_fp8_is_refused():
    with pytest.raises(ValueError, match="needs mixed_precision='fp8'"):
        Accelerator(mixed_precision="bf16", cpu=True, kwargs_handlers=[AORecipeKwargs()])


@pytest.mark.skipif(HAS_TE, reason="Transformer Engine is installed: no missing-engine error")
def test_te_backend_without_transformer_engine_names_the_install():
    with pytest.raises(ImportError, match="transformer-engine"):
        Accelerator(
            mixed_precision="fp8", cpu=True, kwargs_handlers=[FP8RecipeKwargs(backend="TE")]
        )


def test_no_fp8_backend_outside_fp8():
    assert Accelerator(cpu=True).fp8_backend == "NO"


@needs_torchao
@pytest.mark.multiprocess
def test_fp8_with_ddp_on_two_processes():
    result = run_distributed(SCRIPTS / "fp8_ddp.py", num_processes=2, timeout=240)
    assert result.stdout.count("PASSED fp8_ddp") == 2, result.stdout + result.stderr
