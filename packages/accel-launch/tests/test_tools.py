"""`accel estimate-memory` and `accel merge-weights`."""

import importlib.util
import json

import pytest

from .conftest import SCRIPTS, accel

TINY = """
from torch import nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.big = nn.Linear(1000, 1000)
        self.small = nn.Linear(1000, 10)
"""


def test_estimate_memory_of_a_class(tmp_path):
    (tmp_path / "tiny_model.py").write_text(TINY)
    env = {"PYTHONPATH": str(tmp_path)}
    out = accel("estimate-memory", "tiny_model:Tiny", "--json", env=env).stdout
    rows = {r["dtype"]: r for r in json.loads(out)}
    params = 1000 * 1000 + 1000 + 1000 * 10 + 10
    assert rows["float32"]["total_size"] == params * 4
    assert rows["float16"]["total_size"] == params * 2
    assert rows["int8"]["total_size"] == params
    assert rows["float32"]["largest_layer"] == (1000 * 1000 + 1000) * 4
    assert rows["float32"]["largest_layer_names"] == ["big"]
    assert rows["float32"]["training_size"] == params * 4 * 4
    table = accel("estimate-memory", "tiny_model:Tiny", "--dtypes", "float32", env=env).stdout
    assert "float32" in table and "3.86 MiB" in table and "int8" not in table


def test_estimate_memory_errors(capsys):
    from accel_launch.cli import main

    assert main(["estimate-memory", "no_such_module_x:Model"]) == 2
    assert "cannot be imported" in capsys.readouterr().err
    assert main(["estimate-memory", "not-a-path-nor-class"]) == 2
    assert "download the config first" in capsys.readouterr().err


@pytest.mark.skipif(
    importlib.util.find_spec("transformers") is not None,
    reason="checks the message given when transformers is absent",
)
def test_estimate_memory_from_config_without_transformers(tmp_path):
    # A family whose shapes follow from its fields needs no transformers (gpt2's defaults).
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    rows = json.loads(accel("estimate-memory", str(tmp_path), "--json").stdout)
    assert rows[0]["total_size"] == 124_439_808 * 4
    # Any other config is built by transformers, which is missing: the message says so.
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    r = accel("estimate-memory", str(tmp_path), check=False)
    assert r.returncode == 2 and "pip install transformers" in r.stderr


@pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None, reason="transformers is not installed"
)
def test_estimate_memory_from_transformers_config(tmp_path):
    # gpt2's default token ids lie outside this tiny vocabulary: the fields alone do not settle
    # it, so transformers builds the model (and says what it thinks of those ids).
    config = {"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 2, "vocab_size": 100}
    (tmp_path / "config.json").write_text(json.dumps(config))
    result = accel("estimate-memory", str(tmp_path), "--json")
    rows = json.loads(result.stdout)
    assert rows[0]["dtype"] == "float32" and rows[0]["total_size"] > 64 * 100 * 4
    # It says what it is doing, and nothing torch or its extensions log on import; what
    # transformers says about this config (token ids outside the tiny vocabulary) stays.
    status, *rest = result.stderr.strip().splitlines()
    assert status == (
        f"accel estimate-memory: building {tmp_path} on the meta device (no weights; importing "
        "torch and transformers first takes a few seconds)"
    )
    assert rest and all(line.startswith("[transformers] Model config: ") for line in rest), rest


@pytest.mark.multiprocess
def test_merge_weights_of_a_two_process_checkpoint(tmp_path):
    import torch
    from safetensors.torch import load_file

    ckpt, reference = tmp_path / "ckpt", tmp_path / "full.pt"
    accel(
        "launch",
        "--num_processes",
        "2",
        str(SCRIPTS / "save_dcp.py"),
        str(ckpt),
        str(reference),
        timeout=150,
    )
    assert len(list(ckpt.glob("*.distcp"))) == 2  # really sharded over two processes
    from accel_launch.cli import main  # in this process: torch is already imported here

    assert main(["merge-weights", str(ckpt), str(tmp_path / "merged")]) == 0
    merged = load_file(tmp_path / "merged" / "model.safetensors")
    full = torch.load(reference)
    assert sorted(merged) == sorted(full)  # `model.` dropped, `step` (not a tensor) skipped
    for key, value in full.items():
        assert torch.equal(merged[key], value), key
    # Small shards: several files and an index naming where each tensor is.
    assert (
        main(["merge-weights", str(ckpt), str(tmp_path / "sharded"), "--max_shard_size", "60"]) == 0
    )
    index = json.loads((tmp_path / "sharded" / "model.safetensors.index.json").read_text())
    assert index["metadata"]["total_size"] == sum(v.numel() * 4 for v in full.values())
    files = sorted(set(index["weight_map"].values()))
    assert len(files) == 3 and files[0] == "model-00001-of-00003.safetensors"
    for key, name in index["weight_map"].items():
        assert torch.equal(load_file(tmp_path / "sharded" / name)[key], full[key])
    from accel_launch import ConfigError
    from accel_launch.commands._merge import merge_weights

    with pytest.raises(ConfigError, match="does not overwrite"):
        merge_weights(ckpt, tmp_path / "merged")
    with pytest.raises(ConfigError, match="has none"):
        merge_weights(tmp_path, tmp_path / "x")
