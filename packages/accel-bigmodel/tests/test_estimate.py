import pytest
import torch
from bigmodel_helpers import TinyLM

from accel_bigmodel import (
    compute_module_sizes,
    estimate_memory,
    format_memory_table,
    init_empty_weights,
)


def test_estimate_rows_per_dtype():
    with init_empty_weights():
        model = TinyLM(depth=2)
    model._no_split_modules = ["Block"]
    rows = estimate_memory(model)
    assert [r.dtype for r in rows] == ["float32", "float16", "int8", "int4"]
    total = compute_module_sizes(model)[""]
    assert rows[0].total_size == total
    assert rows[1].total_size == total // 2
    assert rows[3].total_size == total // 8
    assert rows[0].training_size == 4 * total
    assert rows[0].largest_layer == compute_module_sizes(model)["blocks.0"]
    assert rows[0].largest_layer_names == ["blocks.0", "blocks.1"]


def test_estimate_from_class_path():
    rows = estimate_memory("torch.nn:Identity", dtypes=["bfloat16"])
    assert rows[0].total_size == 0
    rows = estimate_memory("bigmodel_helpers:TinyLM", dtypes=["float32"])
    assert rows[0].total_size == compute_module_sizes(TinyLM())[""]


def test_estimate_bad_inputs():
    with pytest.raises(FileNotFoundError, match="offline"):
        estimate_memory("some-org/some-model")
    with pytest.raises(ValueError, match="importable"):
        estimate_memory("no_such_module_xyz:Model")
    with pytest.raises(ValueError, match="does not exist"):
        estimate_memory("torch.nn:NoSuchLayer")
    with pytest.raises(TypeError, match="got a int"):
        estimate_memory(5)
    with pytest.raises(ValueError, match="float17"):
        estimate_memory(torch.nn.Linear(2, 2), dtypes=["float17"])


def test_format_memory_table():
    rows = estimate_memory(torch.nn.Linear(1024, 1024), dtypes=["float32", "float16"])
    table = format_memory_table(rows, title="Linear")
    lines = table.splitlines()
    assert lines[0] == "Linear"
    assert "total size" in lines[2] and "float16" in table and "MiB" in table
    assert len({len(line) for line in lines[1:]}) == 1  # aligned columns
