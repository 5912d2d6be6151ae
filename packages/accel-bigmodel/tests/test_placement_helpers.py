"""CustomDtype, file-name patterns, tied-weight checks, module leaves, fallback_allocate,
clean_state_dict_for_safetensors and get_parameter_device."""

from __future__ import annotations

import logging

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from accel_bigmodel import (
    SAFE_MODEL_NAME,
    SAFE_WEIGHTS_NAME,
    SAFE_WEIGHTS_PATTERN_NAME,
    WEIGHTS_NAME,
    WEIGHTS_PATTERN_NAME,
    CustomDtype,
    check_tied_parameters_in_config,
    check_tied_parameters_on_same_device,
    clean_state_dict_for_safetensors,
    compute_module_sizes,
    dtype_byte_size,
    fallback_allocate,
    find_tied_parameters,
    get_module_leaves,
    get_parameter_device,
    shard_checkpoint,
)


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.body = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight


def test_custom_dtype_sizes() -> None:
    assert [m.value for m in CustomDtype] == ["fp8", "int4", "int2"]
    assert dtype_byte_size(CustomDtype.FP8) == 1
    assert dtype_byte_size(CustomDtype.INT4) == 0.5
    assert dtype_byte_size(CustomDtype.INT2) == 0.25


def test_file_name_patterns_agree_with_the_written_names() -> None:
    assert SAFE_WEIGHTS_PATTERN_NAME.format(suffix="") == SAFE_WEIGHTS_NAME
    assert WEIGHTS_PATTERN_NAME.format(suffix="") == WEIGHTS_NAME
    assert SAFE_WEIGHTS_NAME == f"{SAFE_MODEL_NAME}.safetensors"
    state = {"a": torch.zeros(100), "b": torch.zeros(100)}
    shards, _ = shard_checkpoint(state, max_shard_size=500, weights_name=SAFE_WEIGHTS_NAME)
    assert sorted(shards) == [
        SAFE_WEIGHTS_PATTERN_NAME.format(suffix="-00001-of-00002"),
        SAFE_WEIGHTS_PATTERN_NAME.format(suffix="-00002-of-00002"),
    ]


def test_tied_parameters_in_config_of_plain_modules_is_false() -> None:
    assert check_tied_parameters_in_config(Tied()) is False


def test_tied_parameters_in_config_of_a_transformers_model() -> None:
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    config = transformers.GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=16, n_positions=8)
    assert check_tied_parameters_in_config(transformers.GPT2LMHeadModel(config)) is True
    config.tie_word_embeddings = False
    assert check_tied_parameters_in_config(transformers.GPT2LMHeadModel(config)) is False


def test_tied_parameters_on_different_devices_warn(caplog) -> None:
    tied = find_tied_parameters(Tied())
    assert tied == [["embed.weight", "head.weight"]]
    with caplog.at_level(logging.WARNING, logger="accel_bigmodel"):
        check_tied_parameters_on_same_device(tied, {"embed": 0, "body": 0, "head": 0})
    assert caplog.records == []
    with caplog.at_level(logging.WARNING, logger="accel_bigmodel"):
        check_tied_parameters_on_same_device(tied, {"embed": 0, "body": 0, "head": "cpu"})
    assert "embed.weight" in caplog.text and "head.weight" in caplog.text


def test_module_leaves() -> None:
    sizes = compute_module_sizes(Tied())
    leaves = get_module_leaves(sizes)
    assert "" not in leaves and "body" not in leaves and "body.0" not in leaves
    assert "body.0.weight" in leaves and "embed.weight" in leaves
    assert get_module_leaves({"": 1, "a": 1, "a.b": 1, "c": 1}) == ["a.b", "c"]


def test_fallback_allocate_splits_until_something_fits() -> None:
    big = nn.Sequential(nn.Linear(100, 100), nn.Linear(4, 4))
    model = nn.Sequential(big, nn.Linear(2, 2))
    sizes = compute_module_sizes(model)
    modules = list(model.named_children())
    # Breadth first: the block is split, its big layer (a leaf) stays whole and too big, its
    # small layer fits; the block is replaced by its other children in what remains.
    name, module, rest = fallback_allocate(modules, sizes, sizes["0.1"])
    assert name == "0.1" and module is big[1]
    assert [n for n, _ in rest] == ["0.0", "1"]
    name, module, rest = fallback_allocate(modules, sizes, sizes["1"])
    assert name == "1" and module is model[1]
    assert [n for n, _ in rest] == ["0"]
    # Nothing fits; a class that must not be split is skipped whole.
    assert fallback_allocate(modules, sizes, 1) == (None, None, modules)
    assert fallback_allocate(modules, sizes, sizes["0.1"], ["Sequential"])[0] == "1"


def test_fallback_allocate_counts_tied_weights() -> None:
    model = nn.Module()
    model.embed = nn.Embedding(10, 4)  # 160 bytes
    model.head = nn.Linear(4, 10)  # its weight is the embedding's; its bias 40 bytes more
    model.head.weight = model.embed.weight
    sizes = compute_module_sizes(model)
    modules = [("embed", model.embed), ("head", model.head)]
    ties = [["embed.weight", "head.weight"]]
    with_head = sizes["embed"] + sizes["head"] - sizes["head.weight"]
    name, _, rest = fallback_allocate(modules, sizes, with_head, tied_parameters=ties)
    assert name == "embed" and [n for n, _ in rest] == ["head"]
    # One byte less: the embedding no longer fits with the head it drags along.
    name, _, _ = fallback_allocate(modules, sizes, with_head - 1, tied_parameters=ties)
    assert name != "embed"
    # Without the ties, the embedding alone fits.
    assert fallback_allocate(modules, sizes, sizes["embed"])[0] == "embed"
    with pytest.raises(ValueError, match="size"):
        fallback_allocate(modules, sizes, "lots")


def test_clean_state_dict_for_safetensors_round_trip(tmp_path, caplog) -> None:
    model = Tied()
    state = model.state_dict()
    state["note"] = "int8"  # quantization metadata stays
    with caplog.at_level(logging.WARNING, logger="accel_bigmodel"):
        cleaned = clean_state_dict_for_safetensors(state)
    assert "head.weight" in caplog.text
    assert "head.weight" not in cleaned and "head.weight" not in state
    assert cleaned["note"] == "int8"
    tensors = {k: v for k, v in cleaned.items() if isinstance(v, torch.Tensor)}
    save_file(tensors, tmp_path / "model.safetensors")  # refuses shared tensors otherwise
    loaded = load_file(tmp_path / "model.safetensors")
    assert torch.equal(loaded["embed.weight"], model.embed.weight.detach())


def test_clean_state_dict_makes_tensors_contiguous() -> None:
    cleaned = clean_state_dict_for_safetensors({"t": torch.zeros(3, 4).t()})
    assert cleaned["t"].is_contiguous()


def test_get_parameter_device() -> None:
    assert get_parameter_device(nn.Linear(2, 2)) == torch.device("cpu")
    with pytest.raises(ValueError, match="no parameter|none"):
        get_parameter_device(nn.ReLU())
