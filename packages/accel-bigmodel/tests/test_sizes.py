import pytest
import torch
from bigmodel_helpers import TinyLM
from torch import nn

from accel_bigmodel import (
    calculate_maximum_sizes,
    compute_module_sizes,
    convert_file_size_to_int,
    dtype_byte_size,
    get_balanced_memory,
    get_max_layer_size,
    get_max_memory,
    init_empty_weights,
)
from accel_bigmodel.placement._sizes import scan_modules


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1MiB", 2**20),
        ("10GiB", 10 * 2**30),
        ("5GB", 5 * 10**9),
        ("1.5KB", 1500),
        ("8Mb", 10**6),
        ("100", 100),
        (123, 123),
        ("2tib", 2 * 2**40),
    ],
)
def test_convert_file_size_to_int(text, expected):
    assert convert_file_size_to_int(text) == expected


@pytest.mark.parametrize("bad", ["ten GB", "5XB", "-1GB", -3, "", [1]])
def test_convert_file_size_rejects_bad_input(bad):
    with pytest.raises(ValueError, match="size"):
        convert_file_size_to_int(bad)


def test_dtype_byte_size():
    assert dtype_byte_size(torch.float32) == 4
    assert dtype_byte_size(torch.bfloat16) == 2
    assert dtype_byte_size("float16") == 2
    assert dtype_byte_size(torch.int8) == 1
    assert dtype_byte_size(torch.bool) == 1 / 8
    assert dtype_byte_size("int4") == 0.5


def test_dtype_string_that_does_not_exist_is_a_clear_error():
    with pytest.raises(ValueError, match="'float17'.*torch does not define"):
        dtype_byte_size("float17")
    with init_empty_weights():
        model = TinyLM()
    with pytest.raises(ValueError, match="float17"):
        compute_module_sizes(model, dtype="float17")


def test_compute_module_sizes_counts_tied_weights_once():
    with init_empty_weights():
        model = TinyLM(vocab=50, width=16, depth=2)
    sizes = compute_module_sizes(model)
    embed = 50 * 16 * 4
    block = (16 + 16 + 32 * 16 + 32 + 16 * 32 + 16) * 4
    assert sizes["embed"] == embed
    assert sizes["embed.weight"] == embed
    assert sizes["blocks.0"] == block
    assert sizes["head"] == 0  # shares the embedding
    assert sizes[""] == embed + 2 * block + 16 * 4
    half = compute_module_sizes(model, dtype=torch.float16)
    assert half[""] == sizes[""] // 2
    special = compute_module_sizes(
        model, dtype="float16", special_dtypes={"embed.weight": "float32"}
    )
    assert special["embed"] == embed and special["blocks.0"] == block // 2


def test_scan_modules_lists_each_module_once_with_its_parent_and_tied_names():
    with init_empty_weights():
        model = TinyLM(depth=3)
    model.blocks.append(model.blocks[0])  # one block under two names
    scan = scan_modules(model)
    assert [name for name, _ in scan.modules] == [name for name, _ in model.named_modules()]
    for (name, _), parent in zip(scan.modules, scan.parents):
        expected = name.rpartition(".")[0] if name else None
        assert (scan.modules[parent][0] if parent >= 0 else None) == expected
    assert sorted(sorted(names) for names in scan.shared.values()) == [
        ["embed.weight", "head.weight"]
    ]
    assert scan.sizes == compute_module_sizes(model)
    assert sum(scan.own) == scan.sizes[""]


def test_compute_module_sizes_special_dtype_of_one_tensor():
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    sizes = compute_module_sizes(model, dtype="float16", special_dtypes={"1.weight": "float64"})
    assert sizes["0.weight"] == 16 * 2 and sizes["1.weight"] == 16 * 8
    assert sizes["1.bias"] == 4 * 2 and sizes[""] == (16 + 4) * 2 + 16 * 8 + 4 * 2


def test_compute_module_sizes_keeps_integer_buffers():
    module = nn.Module()
    module.register_buffer("ids", torch.zeros(10, dtype=torch.int64))
    assert compute_module_sizes(module, dtype=torch.float16)["ids"] == 80


def test_get_max_layer_size_and_calculate_maximum_sizes():
    with init_empty_weights():
        model = TinyLM(depth=2)
    sizes = compute_module_sizes(model)
    top = list(model.named_children())
    size, names = get_max_layer_size(top, sizes, ["Block"])
    assert size == sizes["blocks.0"] and names == ["blocks.0", "blocks.1"]
    size, names = get_max_layer_size(top, sizes, [])
    assert names == ["embed"]
    model._no_split_modules = ["Block"]
    total, (largest, largest_names) = calculate_maximum_sizes(model)
    assert total == sizes[""] and largest == sizes["blocks.0"]


def test_get_max_memory_orders_and_converts():
    result = get_max_memory({"disk": "1GB", "cpu": "1GiB", 1: 100, 0: "1KB"}, check_devices=False)
    assert list(result) == [0, 1, "cpu", "disk"]
    assert result == {0: 1000, 1: 100, "cpu": 2**30, "disk": 10**9}
    assert get_max_memory()["cpu"] > 0


def test_get_max_memory_rejects_unknown_device():
    with pytest.raises(ValueError, match="'tpu'"):
        get_max_memory({"tpu": "1GB"})


def test_get_balanced_memory_spreads_over_gpus():
    with init_empty_weights():
        model = TinyLM(depth=8)
    total = compute_module_sizes(model)[""]
    gpus = {0: 10**6, 1: 10**6, "cpu": 10**6}
    budget = get_balanced_memory(model, gpus, ["Block"], check_devices=False)
    assert total // 2 < budget[0] < total and budget[1] == 10**6
    low = get_balanced_memory(model, gpus, ["Block"], low_zero=True, check_devices=False)
    assert low[0] == 0
    assert get_balanced_memory(model, {"cpu": 100}) == {"cpu": 100}
