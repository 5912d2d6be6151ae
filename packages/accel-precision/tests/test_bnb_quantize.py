"""bitsandbytes quantization of a small Llama model on the CPU."""

import json
import os

import pytest
import torch

bnb = pytest.importorskip(
    "bitsandbytes", reason='needs bitsandbytes: pip install "accel-precision[bnb]"'
)
transformers = pytest.importorskip("transformers", reason="the test model is a transformers Llama")

from accel_bigmodel import init_empty_weights, load_state_dict  # noqa: E402

from accel_precision import (  # noqa: E402
    BnbQuantizationConfig,
    PendingQuantization,
    get_keys_to_not_convert,
    load_and_quantize_model,
    quantized_memory_footprint,
    replace_with_bnb_layers,
)

CONFIG = transformers.LlamaConfig(
    num_hidden_layers=2,
    hidden_size=128,
    intermediate_size=256,
    num_attention_heads=4,
    num_key_value_heads=4,
    vocab_size=512,
    max_position_embeddings=64,
)
# 7 linear layers per block: q, k, v, o (128x128) and gate, up, down (128x256).
QUANTIZED_WEIGHTS = CONFIG.num_hidden_layers * (4 * 128 * 128 + 3 * 128 * 256)
INT8 = dict(load_in_8bit=True, torch_dtype="fp32")
NF4 = dict(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype="fp32")


def empty_model():
    with init_empty_weights():
        return transformers.LlamaForCausalLM(CONFIG)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A reference model and its checkpoint in 3 safetensors shards."""
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(CONFIG).eval()
    folder = tmp_path_factory.mktemp("llama")
    model.save_pretrained(folder, max_shard_size="300KB")
    assert (folder / "model.safetensors.index.json").exists()
    return model, folder


@pytest.fixture(scope="module")
def inputs():
    torch.manual_seed(1)
    return torch.randint(0, CONFIG.vocab_size, (2, 24))


def logits(model, ids):
    with torch.no_grad():
        return model.eval()(ids).logits.float()


def relative_error(a, b):
    return ((a - b).norm() / b.norm()).item()


def test_output_head_is_kept_by_default():
    assert get_keys_to_not_convert(empty_model()) == ["lm_head"]
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    assert get_keys_to_not_convert(model) == ["1"]


@pytest.mark.parametrize(
    ("kwargs", "layer", "bytes_per_weight", "tolerance"),
    # Relative L2 error of the logits against the float32 model, measured here: int8 0.016,
    # nf4 0.17 (random weights are harder to quantize than trained ones).
    [(INT8, "Linear8bitLt", 1.0, 0.05), (NF4, "Linear4bit", 0.5, 0.30)],
)
def test_quantized_model_is_close_to_full_precision(
    checkpoint, inputs, kwargs, layer, bytes_per_weight, tolerance
):
    reference, folder = checkpoint
    model = load_and_quantize_model(empty_model(), BnbQuantizationConfig(**kwargs), folder)
    up = model.model.layers[0].mlp.up_proj
    assert type(up).__name__ == layer
    assert type(model.lm_head) is torch.nn.Linear
    assert model.lm_head.weight.dtype == torch.float32
    assert not any(isinstance(p, PendingQuantization) for p in model.parameters())
    assert model.is_loaded_in_8bit == kwargs.get("load_in_8bit", False)
    error = relative_error(logits(model, inputs), logits(reference, inputs))
    assert error < tolerance, error
    # Quantized weights take bytes_per_weight each. Statistics: int8 has one fp32 scale per
    # row (under 1%); nf4 without double quantization one fp32 scale per 64 weights, i.e.
    # half a bit per 4-bit weight (12.5%).
    footprint = quantized_memory_footprint(model)
    assert footprint["quantized"] == QUANTIZED_WEIGHTS * bytes_per_weight
    assert 0 < footprint["statistics"] < 0.14 * footprint["quantized"]
    full = sum(p.numel() * 4 for p in reference.model.layers.parameters() if p.dim() == 2)
    assert footprint["quantized"] <= full * bytes_per_weight / 4


def test_loading_never_holds_full_precision_quantized_weights(checkpoint, monkeypatch):
    """Each weight becomes int8 the moment the loader places it: at no point do two
    full-precision linear weights of quantized layers exist side by side."""
    _, folder = checkpoint
    seen: list[torch.dtype] = []
    original = PendingQuantization.__new__

    def spy(cls, data=None, requires_grad=False, _accel_quant=None, **kwargs):
        result = original(cls, data, requires_grad, _accel_quant, **kwargs)
        if data is not None and data.device.type != "meta":
            seen.append(result.dtype)
        return result

    monkeypatch.setattr(PendingQuantization, "__new__", spy)
    load_and_quantize_model(empty_model(), BnbQuantizationConfig(**INT8), folder)
    assert seen == [torch.int8] * (7 * CONFIG.num_hidden_layers)


def test_skip_and_fp32_modules(checkpoint):
    _, folder = checkpoint
    config = BnbQuantizationConfig(
        load_in_8bit=True,
        torch_dtype="bf16",
        skip_modules=["lm_head", "model.layers.1.mlp"],
        keep_in_fp32_modules=["model.layers.0.self_attn.o_proj"],
    )
    model = load_and_quantize_model(empty_model(), config, folder)
    layer0, layer1 = model.model.layers
    assert type(layer1.mlp.up_proj) is torch.nn.Linear
    assert layer1.mlp.up_proj.weight.dtype == torch.bfloat16
    assert type(layer0.self_attn.o_proj) is torch.nn.Linear
    assert layer0.self_attn.o_proj.weight.dtype == torch.float32
    assert layer0.self_attn.q_proj.weight.dtype == torch.int8
    assert model.model.norm.weight.dtype == torch.bfloat16
    assert config.skip_modules == ["lm_head", "model.layers.1.mlp"]  # the config is not mutated


def test_disk_offloaded_8bit_layers_are_stored_in_int8(checkpoint, inputs, tmp_path):
    _, folder = checkpoint
    in_memory = load_and_quantize_model(empty_model(), BnbQuantizationConfig(**INT8), folder)
    device_map = {
        "model.embed_tokens": "cpu",
        "model.layers.0": "cpu",
        "model.layers.1": "disk",
        "model.norm": "cpu",
        "model.rotary_emb": "cpu",
        "lm_head": "cpu",
    }
    offload = tmp_path / "offload"
    model = load_and_quantize_model(
        empty_model(), BnbQuantizationConfig(**INT8), folder, device_map, offload_folder=offload
    )
    index = json.loads((offload / "index.json").read_text())
    down = "model.layers.1.mlp.down_proj.weight"
    assert index[down]["dtype"].lower() in ("i8", "int8")
    assert os.path.getsize(offload / f"{down}.dat") == 256 * 128
    assert model.model.layers[1].mlp.down_proj.weight.device.type == "meta"
    assert torch.equal(logits(model, inputs), logits(in_memory, inputs))
    assert model.model.layers[1].mlp.down_proj.weight.device.type == "meta"


def test_4bit_layers_mapped_to_disk_stay_unquantized(checkpoint, inputs, tmp_path):
    _, folder = checkpoint
    device_map = {"model.layers.1": "disk", "model": "cpu", "lm_head": "cpu"}
    model = load_and_quantize_model(
        empty_model(), BnbQuantizationConfig(**NF4), folder, device_map, offload_folder=tmp_path
    )
    assert type(model.model.layers[1].mlp.up_proj) is torch.nn.Linear
    assert type(model.model.layers[0].mlp.up_proj).__name__ == "Linear4bit"
    assert torch.isfinite(logits(model, inputs)).all()


def test_4bit_layers_offloaded_by_a_computed_map_are_refused(checkpoint, tmp_path):
    _, folder = checkpoint
    with pytest.raises(ValueError, match="4-bit layers cannot be offloaded"):
        load_and_quantize_model(
            empty_model(),
            BnbQuantizationConfig(**NF4),
            folder,
            device_map="auto",
            max_memory={"cpu": 300_000, "disk": 10**9},
            offload_folder=tmp_path,
        )


def test_already_loaded_model_is_quantized_in_place(checkpoint, inputs):
    reference, _ = checkpoint
    model = transformers.LlamaForCausalLM(CONFIG)
    model.load_state_dict(reference.state_dict())
    model = load_and_quantize_model(model, BnbQuantizationConfig(**INT8))
    assert model.model.layers[0].mlp.up_proj.weight.dtype == torch.int8
    assert relative_error(logits(model, inputs), logits(reference, inputs)) < 0.05


def test_meta_model_needs_weights():
    with pytest.raises(ValueError, match="got weights_location=None"):
        load_and_quantize_model(empty_model(), BnbQuantizationConfig(**INT8))


@pytest.mark.parametrize("kwargs", [INT8, NF4], ids=["int8", "nf4"])
def test_save_and_reload_quantized_model(checkpoint, inputs, tmp_path, kwargs):
    from safetensors.torch import save_file

    _, folder = checkpoint
    config = BnbQuantizationConfig(**kwargs)
    model = load_and_quantize_model(empty_model(), config, folder)
    # On a CPU with AVX512-BF16, bitsandbytes repacks 4-bit weights at the first evaluation
    # forward (bf16 block scales); state_dict() saves the stored form, and the reloaded model
    # repacks it the same way, so both compute with the same weights.
    logits(model, inputs)
    expected = logits(model, inputs)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, tmp_path / "quantized.safetensors")
    size = os.path.getsize(tmp_path / "quantized.safetensors")
    assert size < sum(os.path.getsize(p) for p in folder.glob("*.safetensors"))

    fresh = replace_with_bnb_layers(empty_model(), config, ["lm_head"])
    missing, unexpected = fresh.load_state_dict(
        load_state_dict(str(tmp_path / "quantized.safetensors")), strict=False, assign=True
    )
    assert not unexpected
    assert all("rotary_emb" in k for k in missing)
    fresh.model.rotary_emb.inv_freq = model.model.rotary_emb.inv_freq
    torch.testing.assert_close(logits(fresh, inputs), expected)
    torch.testing.assert_close(logits(fresh, inputs), expected)


def test_tied_head_stays_tied_and_unquantized(tmp_path, inputs):
    config = transformers.LlamaConfig(**{**CONFIG.to_dict(), "tie_word_embeddings": True})
    torch.manual_seed(0)
    reference = transformers.LlamaForCausalLM(config).eval()
    reference.save_pretrained(tmp_path)
    with init_empty_weights():
        model = transformers.LlamaForCausalLM(config)
    assert get_keys_to_not_convert(model) == ["lm_head", "model.embed_tokens"]
    model = load_and_quantize_model(model, BnbQuantizationConfig(**INT8), tmp_path)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert relative_error(logits(model, inputs), logits(reference, inputs)) < 0.05


def test_current_key_name_places_a_submodule_in_the_whole_model():
    config = BnbQuantizationConfig(**INT8)
    block = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 64))
    replace_with_bnb_layers(block, config, ["layers.3.1"], current_key_name=["layers", "3"])
    assert type(block[0]) is not torch.nn.Linear
    assert type(block[1]) is torch.nn.Linear


def _retext(state, key, edit):
    """Rewrite the packed JSON of ``key``'s quantization state, keeping its byte length."""
    name = next(k for k in state if k.startswith(key + ".quant_state.bitsandbytes__"))
    text = bytes(state[name].numpy()).decode()
    changed = edit(text)
    assert len(changed) == len(text) and changed != text
    state[name] = torch.frombuffer(bytearray(changed.encode()), dtype=torch.uint8)
    return name


SAME_LENGTH = {
    # q_proj is 128 x 128 (square: a swapped shape would still fit), gate_proj 256 x 128
    "shape swapped": ("gate_proj", lambda t: t.replace("[256, 128]", "[128, 256]"), "'shape'"),
    "blocksize": ("q_proj", lambda t: t.replace('"blocksize": 64', '"blocksize": 32'), "blocksize"),
    "quant_type": ("q_proj", lambda t: t.replace('"nf4"', '"fp4"'), "'quant_type'"),
    "dtype": ("q_proj", lambda t: t.replace('"float32",', '"int64",  ', 1), "'dtype'"),
}


@pytest.mark.parametrize("case", sorted(SAME_LENGTH))
def test_a_same_length_edit_of_a_4bit_quant_state_is_refused(checkpoint, tmp_path, case):
    from accel_precision import QuantStateMismatchError

    _, folder = checkpoint
    config = BnbQuantizationConfig(**NF4, bnb_4bit_use_double_quant=True)
    model = load_and_quantize_model(empty_model(), config, folder)
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    layer, edit, field = SAME_LENGTH[case]
    parent = "mlp" if layer == "gate_proj" else "self_attn"
    key = f"model.layers.0.{parent}.{layer}.weight"
    _retext(state, key, edit)
    fresh = replace_with_bnb_layers(empty_model(), config, ["lm_head"])
    with pytest.raises(QuantStateMismatchError, match=field) as refused:
        fresh.load_state_dict(state, strict=False, assign=True)
    assert key in str(refused.value) and "Nothing was loaded" in str(refused.value)
