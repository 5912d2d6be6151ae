import pytest
import torch

transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (optional test dependency)"
)

from bigmodel_helpers import checkpoint_state  # noqa: E402

from accel_bigmodel import (  # noqa: E402
    compute_module_sizes,
    estimate_memory,
    infer_auto_device_map,
    init_empty_weights,
    load_checkpoint_and_dispatch,
    write_safetensors,
)


def _llama_config():
    return transformers.LlamaConfig(
        vocab_size=128,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=True,
    )


def _gpt2_config():
    return transformers.GPT2Config(vocab_size=128, n_positions=32, n_embd=32, n_layer=4, n_head=4)


@pytest.mark.parametrize(
    ("make_config", "block"), [(_llama_config, "LlamaDecoderLayer"), (_gpt2_config, "GPT2Block")]
)
@torch.no_grad()
def test_tiny_transformers_model_with_half_on_disk(tmp_path, make_config, block):
    config = make_config()
    torch.manual_seed(0)
    reference = transformers.AutoModelForCausalLM.from_config(config).eval()
    path = tmp_path / "model.safetensors"
    write_safetensors(str(path), checkpoint_state(reference))
    ids = torch.randint(0, 128, (1, 8))
    expected = reference(ids).logits

    with init_empty_weights():
        model = transformers.AutoModelForCausalLM.from_config(config)
    model.eval()
    half = compute_module_sizes(model)[""] // 2
    model = load_checkpoint_and_dispatch(
        model,
        str(path),
        device_map="auto",
        max_memory={"cpu": half, "disk": "1GB"},
        no_split_module_classes=[block],
        offload_folder=tmp_path / "offload",
    )
    assert "disk" in model.hf_device_map.values()
    torch.testing.assert_close(model(ids).logits, expected)
    out = model.generate(ids, max_new_tokens=3, do_sample=False)
    assert out.shape == (1, 11)


def test_estimate_memory_from_config_json(tmp_path):
    _llama_config().save_pretrained(tmp_path)
    rows = estimate_memory(str(tmp_path), dtypes=["float32", "float16"])
    assert rows[0].total_size == 2 * rows[1].total_size
    with init_empty_weights():
        model = transformers.AutoModelForCausalLM.from_config(_llama_config())
    assert rows[0].total_size == compute_module_sizes(model)[""]
    assert "LlamaDecoderLayer" not in rows[0].largest_layer_names[0]


def test_tied_t5_embeddings_are_planned_together_across_two_gpus():
    # T0pp's layout at a small size: the shared embedding is tied to the encoder's and the
    # decoder's, the last of which comes after every encoder block; all three go with the first.
    config = transformers.T5Config(
        vocab_size=256,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=4,
        num_heads=4,
        feed_forward_proj="gated-gelu",
        tie_word_embeddings=False,
    )
    with init_empty_weights():
        model = transformers.AutoModelForSeq2SeqLM.from_config(config)
    model.tie_weights()
    special_dtypes = {n: torch.float32 for n, _ in model.named_parameters() if "wo" in n}
    device_map = infer_auto_device_map(
        model,
        max_memory={0: 60_000, 1: 60_000, "cpu": 10**9},  # the model needs 214,912 bytes
        no_split_module_classes=["T5Block"],
        dtype=torch.float16,
        special_dtypes=special_dtypes,
    )
    assert set(device_map.values()) == {0, 1, "cpu"}
    tied = ("shared", "encoder.embed_tokens", "decoder.embed_tokens")
    assert [device_map[name] for name in tied] == [0, 0, 0]
