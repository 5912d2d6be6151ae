"""FP8 training (torchao) and bitsandbytes int8 / nf4 on the GPU.

FP8 matrix products need compute capability 8.9 or newer (Ada, Hopper). bitsandbytes layers are
compared with the float32 model on the same GPU; tolerances (relative L2 of the logits) are the
CPU suite's: int8 0.05, nf4 0.30 (random weights quantize worse than trained ones).
"""

from __future__ import annotations

import importlib.util

import pytest
import torch
from _gpu_models import regression_data, regression_mlp, relative
from accel import Accelerator
from accel.big_modeling import init_empty_weights
from accel.utils import AORecipeKwargs, BnbQuantizationConfig, load_and_quantize_model

pytestmark = pytest.mark.cuda


def _needs(module: str, install: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"needs {module}, which is not installed here: {install}")


def test_fp8_with_torchao_trains_and_its_loss_falls():
    _needs("torchao", 'pip install "accel-precision[torchao]"')
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip(
            f"FP8 needs compute capability >= 8.9; got {torch.cuda.get_device_capability()}"
        )
    from torchao.float8.float8_linear import Float8Linear

    accelerator = Accelerator(mixed_precision="fp8", kwargs_handlers=[AORecipeKwargs()])
    assert accelerator.fp8_backend == "AO"
    model = regression_mlp(width=256)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, optimizer = accelerator.prepare(model, optimizer)
    assert isinstance(model[3], Float8Linear), type(model[3])
    x, y = (t.cuda() for t in regression_data(1024, width=256))
    losses = []
    for _ in range(40):
        loss = torch.nn.functional.mse_loss(model(x).float(), y)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses))), losses
    assert losses[-1] < 0.5 * losses[0], losses


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    _needs("bitsandbytes", 'pip install "accel-precision[bnb]"')
    _needs("transformers", "pip install transformers")
    import transformers

    config = transformers.LlamaConfig(
        num_hidden_layers=2,
        hidden_size=256,
        intermediate_size=512,
        num_attention_heads=4,
        num_key_value_heads=4,
        vocab_size=512,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    folder = tmp_path_factory.mktemp("llama")
    model.save_pretrained(folder)
    return config, model.cuda(), folder


@pytest.mark.parametrize(
    ("kwargs", "layer", "tolerance"),
    [
        ({"load_in_8bit": True, "torch_dtype": "fp32"}, "Linear8bitLt", 0.05),
        (
            {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_compute_dtype": "bf16"},
            "Linear4bit",
            0.30,
        ),
    ],
    ids=["int8", "nf4"],
)
@torch.no_grad()
def test_bitsandbytes_layers_run_on_the_gpu(llama, kwargs, layer, tolerance):
    import transformers

    config, reference, folder = llama
    with init_empty_weights():
        empty = transformers.LlamaForCausalLM(config)
    model = load_and_quantize_model(
        empty, BnbQuantizationConfig(**kwargs), folder, device_map={"": 0}
    ).eval()
    up = model.model.layers[0].mlp.up_proj
    assert type(up).__name__ == layer
    assert up.weight.device.type == "cuda"
    assert up.weight.dtype == (torch.int8 if "load_in_8bit" in kwargs else torch.uint8)
    ids = torch.randint(0, config.vocab_size, (2, 24), device="cuda")
    error = relative(model(ids).logits, reference(ids).logits)
    print(f"{layer}: relative L2 of the logits vs float32 {error:.3f}")
    assert error < tolerance, error
