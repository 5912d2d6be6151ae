"""Transformer Engine and MS-AMP need CUDA builds; these tests run where they are installed."""

import importlib.util

import pytest
import torch

from accel_precision import (
    MSAMPRecipeKwargs,
    TERecipeKwargs,
    convert_model_to_fp8,
    has_transformer_engine_layers,
    make_te_recipe,
    prepare_msamp_objects,
)

HAS_TE = importlib.util.find_spec("transformer_engine") is not None
HAS_MSAMP = importlib.util.find_spec("msamp") is not None


@pytest.mark.cuda
@pytest.mark.skipif(
    not HAS_TE, reason='needs Transformer Engine: pip install "transformer-engine[pytorch]"'
)
def test_transformer_engine_converts_and_trains():
    import transformer_engine.pytorch as te

    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.LayerNorm(64), torch.nn.Linear(64, 16)
    ).cuda()
    before = model[0].weight.detach().clone()
    replaced = convert_model_to_fp8(model, TERecipeKwargs())
    assert isinstance(model[0], te.Linear) and isinstance(model[1], te.LayerNorm)
    assert has_transformer_engine_layers(model)
    assert torch.equal(model[0].weight.detach(), before)
    assert len(replaced) == 6
    recipe = make_te_recipe(TERecipeKwargs(fp8_format="HYBRID"))
    with te.fp8_autocast(enabled=True, fp8_recipe=recipe):
        model(torch.randn(16, 32, device="cuda")).sum().backward()
    assert model[0].weight.grad is not None


@pytest.mark.skipif(HAS_TE, reason="Transformer Engine is installed here")
def test_has_transformer_engine_layers_names_the_install_command_without_it():
    with pytest.raises(ImportError, match=r"has_transformer_engine_layers.*transformer-engine"):
        has_transformer_engine_layers(torch.nn.Linear(2, 2))


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_MSAMP, reason="needs MS-AMP (installed from source)")
def test_msamp_initialises_model_and_optimizer():
    model = torch.nn.Linear(32, 32).cuda()
    optimizer = torch.optim.AdamW(model.parameters())
    new_model, new_optimizer = prepare_msamp_objects([model, optimizer], MSAMPRecipeKwargs("O2"))
    assert new_optimizer is not optimizer
    new_model(torch.randn(4, 32, device="cuda")).sum().backward()
    new_optimizer.step()


def test_msamp_needs_model_and_optimizer_together():
    with pytest.raises(ValueError, match="got 1 model\\(s\\) and 0 optimizer\\(s\\)"):
        prepare_msamp_objects([torch.nn.Linear(2, 2)], MSAMPRecipeKwargs())
    loader = torch.utils.data.DataLoader(list(range(4)))
    assert prepare_msamp_objects([loader], MSAMPRecipeKwargs()) == [loader]
