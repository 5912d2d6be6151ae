"""4-bit layers repacked for bitsandbytes' CPU kernel save and move exactly what they loaded.

On a CPU with AVX512-BF16, bitsandbytes' 4-bit forward repacks the weight for its fast kernel
(bfloat16 block scales, double quantization undone). That repacking is real here (bitsandbytes'
own forward does it); only the kernel call after it is replaced, because it needs an
instruction set this test may not have. What is checked is what a user keeps: the state dict
and the moved layer, bit for bit against the layer before its first forward.
"""

import pytest
import torch

bnb = pytest.importorskip(
    "bitsandbytes", reason='needs bitsandbytes: pip install "accel-precision[bnb]"'
)

from accel_bigmodel import init_empty_weights  # noqa: E402

from accel_precision import BnbQuantizationConfig, replace_with_bnb_layers  # noqa: E402
from accel_precision._bnb_layers import _about_to_repack  # noqa: E402


def _config(double_quant: bool) -> BnbQuantizationConfig:
    return BnbQuantizationConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_compute_dtype="fp32",
        bnb_4bit_use_double_quant=double_quant,
    )


def _model(double_quant: bool, empty: bool = False) -> torch.nn.Module:
    torch.manual_seed(0)
    if empty:
        with init_empty_weights():
            model = torch.nn.Sequential(torch.nn.Linear(256, 64), torch.nn.Linear(64, 8))
    else:
        model = torch.nn.Sequential(torch.nn.Linear(256, 64), torch.nn.Linear(64, 8))
    return replace_with_bnb_layers(model, _config(double_quant), ["1"]).eval()


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].dtype == b[key].dtype and torch.equal(a[key], b[key]), key


@pytest.mark.parametrize("double_quant", [False, True], ids=["scales", "double-quant"])
@torch.no_grad()
def test_a_repacked_layer_saves_and_moves_what_it_loaded(monkeypatch, double_quant):
    model = _model(double_quant)
    x = torch.randn(4, 256, generator=torch.Generator().manual_seed(1))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    layer = model[0]
    layer.support_avx512bf16_for_cpu = False
    expected = model(x)

    layer.support_avx512bf16_for_cpu = True
    assert _about_to_repack(layer, x)
    assert not _about_to_repack(layer, x.clone().requires_grad_(True))
    shape = (x.shape[0], layer.out_features)
    monkeypatch.setattr(bnb, "matmul_4bit", lambda *a, **k: torch.zeros(shape))
    layer(x)  # bitsandbytes' own forward repacks the weight for its CPU kernel
    assert layer.weight.quant_state.packing_format_for_cpu
    _same(model.state_dict(), before)

    # A fresh model loads what was saved and computes exactly what the first one did.
    monkeypatch.undo()
    fresh = _model(double_quant, empty=True)
    fresh.load_state_dict(model.state_dict(), assign=True)
    fresh[0].support_avx512bf16_for_cpu = False
    torch.testing.assert_close(fresh(x), expected, rtol=0, atol=0)

    # Moving the layer moves its stored form, not the kernel's layout.
    model.to("cpu")
    assert not getattr(layer.weight.quant_state, "packing_format_for_cpu", False)
    _same(model.state_dict(), before)
    layer.support_avx512bf16_for_cpu = False
    torch.testing.assert_close(model(x), expected, rtol=0, atol=0)


@torch.no_grad()
def test_training_and_gradients_never_repack():
    layer = _model(False)[0]
    layer.support_avx512bf16_for_cpu = True
    x = torch.randn(2, 256)
    assert _about_to_repack(layer, x)
    layer.train()
    assert not _about_to_repack(layer, x)
    layer.eval()
    layer.support_avx512bf16_for_cpu = False
    assert not _about_to_repack(layer, x)
